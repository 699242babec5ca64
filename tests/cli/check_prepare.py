#!/usr/bin/env python3
"""Checks `vkattn prepare`: it builds the default path's pipelines and lists each one it built with its
build time and name, as many as it says it built; on a CPU device it says the JIT comes later.

    /usr/bin/python3 tests/cli/check_prepare.py --vkattn build/release/tools/vkattn

One line per check: PASS/FAIL and what was seen. Exits 1 when any check fails.
"""
import argparse
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default=os.path.join(REPO, "build", "release", "tools", "vkattn"))
    args = parser.parse_args()
    failed = 0

    def check(name, ok, detail=""):
        nonlocal failed
        print(f"{'PASS' if ok else 'FAIL'} {name}: {' '.join(str(detail).split())[:200]}", flush=True)
        failed += 0 if ok else 1

    # A head dim no other test of the run prepares, so that this process builds its pipelines.
    proc = subprocess.run([args.vkattn, "prepare", "--dims", "40", "--dtype", "f32"], capture_output=True, text=True,
                          timeout=600)
    check("exit 0, nothing on stderr", proc.returncode == 0 and proc.stderr == "", proc.stderr[-300:])
    out = proc.stdout
    count = re.search(r"^prepare\s+[\d.]+ ms \((\d+) pipelines, f32\)$", out, re.M)
    built = re.findall(r"^  built\s+([\d.]+) ms  #(\d+) (\S.*)$", out, re.M)
    check("the prepare line says how many pipelines", count is not None, out[:300])
    check("one built line per pipeline the Context built, each numbered apart",
          count is not None and len(built) == int(count.group(1)) and len({b[1] for b in built}) == len(built), out[:600])
    check("build times are non-negative and names are the kernels'",
          all(float(ms) >= 0 and name.startswith(("attention_", "gemm")) for ms, _, name in built), str(built)[:300])
    cpu = "llvmpipe" in out.splitlines()[0] if out else False
    check("on a CPU device it says the JIT comes at the first dispatch",
          ("JIT-compiles at its first dispatch" in out) == (cpu and len(built) > 0), out[-300:])
    print(f"{failed} check(s) failed" if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
