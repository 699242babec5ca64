#!/usr/bin/env python3
"""Checks that `vkattn run` harms nothing the caller owns at its output paths (tools/support/output_files.hpp):
a character device and a FIFO are written through (a FIFO without a reader is refused), a symlink is
followed and stays a link, a read-only file and an input (also through a hard link) are refused and
unchanged, and a two-output command whose second output cannot be committed leaves the first
output's old file unchanged. Also: strict numbers and non-empty values on the command line, and every bad option
value (--window, --softcap, --scale, --shard, ...) of every command a usage error (exit 2, one line).

    python3 tests/cli/check_output_files.py --vkattn build/release/tools/vkattn

Runs every check as the current user and, when that is root, again as an unprivileged user
(setpriv --reuid=65534); checks that need root (mknod, another user's file) are skipped otherwise,
with the reason printed. Exits 1 when any check fails.
"""
import argparse
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

try:
    import numpy as np
except ImportError:
    sys.exit("check_output_files: error: numpy is required (Debian: apt install python3-numpy)")

NOBODY = 65534
OLD = b"old contents\n"


class Checker:
    def __init__(self, vkattn, root_dir, as_nobody):
        self.vkattn, self.root_dir, self.as_nobody = vkattn, root_dir, as_nobody
        self.failures = 0
        self.who = "uid 65534" if as_nobody else "uid %d" % os.geteuid()

    def case_dir(self, name):
        d = os.path.join(self.root_dir, ("nobody-" if self.as_nobody else "self-") + name)
        os.mkdir(d)
        os.chmod(d, 0o777)  # the unprivileged user creates its temporaries here
        rng = np.random.default_rng(0)
        for n in "qkv":
            np.save(os.path.join(d, n + ".npy"), rng.standard_normal((1, 2, 4, 8)).astype(np.float32))
        return d

    def run(self, d, args, command="run"):
        cmd = [self.vkattn, command]
        if command == "run":
            cmd += ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy"]
        cmd += args
        env = dict(os.environ, HOME=d, XDG_CACHE_HOME=d)
        if self.as_nobody:
            cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"] + cmd
        return subprocess.run(cmd, cwd=d, env=env, capture_output=True, timeout=120)

    def expect(self, name, ok, detail=""):
        print("%s  %-48s %s %s" % ("PASS" if ok else "FAIL", name, self.who, detail))
        if not ok:
            self.failures += 1

    def one_line(self, proc):
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        return len(lines) == 1 and lines[0].startswith("vkattn: error: "), (lines[0] if lines else "")

    def refused(self, name, proc, path, old):
        single, line = self.one_line(proc)
        with open(path, "rb") as f:
            unchanged = f.read() == old
        self.expect(name, proc.returncode == 1 and single and unchanged, line)

    def check_all(self, is_root):
        self.check_special_files(is_root)
        self.check_aliases_and_commits()
        self.check_usage_errors()

    def check_special_files(self, is_root):
        """Outputs that are not plain files: devices, FIFOs, links, read-only files."""
        # A character device: written through, still a device (root only: mknod).
        if is_root:
            d = self.case_dir("chardev")
            os.mknod(os.path.join(d, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.chmod(os.path.join(d, "null"), 0o666)
            p = self.run(d, ["--out", "null"])
            self.expect("--out on a character device", p.returncode == 0 and stat.S_ISCHR(os.lstat(os.path.join(d, "null")).st_mode),
                        p.stderr.decode(errors="replace").strip())
        else:
            print("SKIP  --out on a character device (mknod needs root)")

        # A FIFO with a reader: written through; without one: refused, still a FIFO.
        d = self.case_dir("fifo")
        fifo = os.path.join(d, "ff")
        os.mkfifo(fifo)
        os.chmod(fifo, 0o666)
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
        reader.start()
        p = self.run(d, ["--out", "ff"])
        reader.join(30)
        if reader.is_alive():  # nothing was written through: unblock it (a daemon thread at worst)
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        self.expect("--out on a FIFO with a reader", p.returncode == 0 and got and got[0][:6] == b"\x93NUMPY"
                    and stat.S_ISFIFO(os.lstat(fifo).st_mode), p.stderr.decode(errors="replace").strip())
        p = self.run(d, ["--out", "ff"])
        single, line = self.one_line(p)
        self.expect("--out on a FIFO without a reader: refused", p.returncode == 1 and single and
                    stat.S_ISFIFO(os.lstat(fifo).st_mode), line)

        # A symlink: followed; the link stays a link.
        d = self.case_dir("symlink")
        target = os.path.join(d, "target.npy")
        with open(target, "wb") as f:
            f.write(OLD)
        os.chmod(target, 0o666)
        os.symlink("target.npy", os.path.join(d, "link.npy"))
        p = self.run(d, ["--out", "link.npy"])
        with open(target, "rb") as f:
            written = f.read(6) == b"\x93NUMPY"
        self.expect("--out on a symlink: followed", p.returncode == 0 and os.path.islink(os.path.join(d, "link.npy")) and written,
                    p.stderr.decode(errors="replace").strip())

        # A read-only file of another user (root can make one; otherwise our own 0444 file).
        d = self.case_dir("readonly")
        ro = os.path.join(d, "ro.npy")
        with open(ro, "wb") as f:
            f.write(OLD)
        os.chmod(ro, 0o444)
        if is_root and not self.as_nobody:
            os.chown(ro, NOBODY, NOBODY)
        self.refused("--out on a read-only file: refused", self.run(d, ["--out", "ro.npy"]), ro, OLD)
        # Another user's file that is writable only by its owner (0644): refused for the others.
        if self.as_nobody:
            mine = os.path.join(d, "rootfile.npy")
            with open(mine, "wb") as f:
                f.write(OLD)
            os.chmod(mine, 0o644)
            self.refused("--out on another user's 0644 file: refused", self.run(d, ["--out", "rootfile.npy"]), mine, OLD)

    def check_aliases_and_commits(self):
        """An output naming an input, and a second output that cannot be committed."""
        # An input, by name, through ./ and through a hard link.
        d = self.case_dir("alias")
        q = os.path.join(d, "q.npy")
        os.chmod(q, 0o666)  # writable by everyone: only the alias check may refuse it
        with open(q, "rb") as f:
            q_bytes = f.read()
        os.link(q, os.path.join(d, "hard.npy"))
        for out in ("q.npy", "./q.npy", "hard.npy"):
            p = self.run(d, ["--out", out])
            self.refused("--out %s naming --q: refused" % out, p, q, q_bytes)
            self.expect("  ... as an input", b"refusing to overwrite an input" in p.stderr)

        # Two outputs, the second cannot be committed: the first output's old file is unchanged.
        d = self.case_dir("two")
        o = os.path.join(d, "o.npy")
        with open(o, "wb") as f:
            f.write(OLD)
        os.chmod(o, 0o666)
        os.mkfifo(os.path.join(d, "ff"))
        os.chmod(os.path.join(d, "ff"), 0o666)
        os.mkdir(os.path.join(d, "dir.npy"))
        self.refused("--out o.npy --lse <FIFO, no reader>", self.run(d, ["--out", "o.npy", "--lse", "ff"]), o, OLD)
        self.refused("--out o.npy --lse <a directory>", self.run(d, ["--out", "o.npy", "--lse", "dir.npy"]), o, OLD)
        p = self.run(d, ["--out", "o.npy", "--lse", "lse.npy"])
        with open(o, "rb") as f:
            replaced = f.read(6) == b"\x93NUMPY"
        self.expect("--out o.npy --lse lse.npy: both written", p.returncode == 0 and replaced and
                    os.path.exists(os.path.join(d, "lse.npy")), p.stderr.decode(errors="replace").strip())
        leftovers = [n for n in os.listdir(d) if ".vkattn-" in n]
        self.expect("no temporary or backup file left", not leftovers, " ".join(leftovers))

    def check_usage_errors(self):
        """Bad values of options: usage errors (exit 2), one line, nothing written."""
        # Strict numbers and non-empty values: usage errors (exit 2), one line.
        d = self.case_dir("numbers")
        for command, args in (("run", ["--out", "o.npy", "--scale", ""]), ("run", ["--out", "o.npy", "--scale", "0x10"]),
                              ("run", ["--out", "o.npy", "--scale", "nan"]), ("run", ["--out", "o.npy", "--lse", ""]),
                              ("bench", ["--seed", "-1"]), ("bench", ["--budget", "nan"]), ("bench", ["--batch", "010"])):
            p = self.run(d, args, command)
            single, line = self.one_line(p)
            self.expect("%s %s: usage error" % (command, " ".join(repr(a) if a == "" else a for a in args)),
                        p.returncode == 2 and single and not os.path.exists(os.path.join(d, "o.npy")), line)

        # Bad values of options with a grammar of their own (issue 37, defect 7), on every command:
        # usage errors like the numbers above (exit 2), one line naming the option, nothing written,
        # whether the value is refused by its syntax or by its range.
        d = self.case_dir("option-values")
        rng = np.random.default_rng(1)
        E = 8
        np.savez(os.path.join(d, "w.npz"), **{
            "in_proj_weight": rng.standard_normal((3 * E, E)).astype(np.float32),
            "in_proj_bias": np.zeros(3 * E, np.float32),
            "out_proj.weight": rng.standard_normal((E, E)).astype(np.float32),
            "out_proj.bias": np.zeros(E, np.float32)})
        np.save(os.path.join(d, "x.npy"), rng.standard_normal((1, 4, E)).astype(np.float32))
        mha = ["--weights", "w.npz", "--query", "x.npy", "--heads", "2", "--out", "o.npy"]
        bad_window = ["0x1:0", "1:", ":1", "1:2:3", "1", "-2:0", "1:-5", "99999999999999999999:0", "1.5:0", "nan:0", ""]
        bad_softcap = ["0", "-1", "1e39", "-1e39", "1e-50", "1e-40", "nan", "inf", "0x10", ""]
        cases = [("run", ["--out", "o.npy", "--window", w], "--window") for w in bad_window]
        cases += [("run", ["--out", "o.npy", "--softcap", c], "--softcap") for c in bad_softcap]
        cases += [("run", ["--out", "o.npy", "--scale", c], "--scale") for c in ("1e39", "-1e39", "inf")]
        cases += [("mha", mha + ["--window", w], "--window") for w in ("1:", "1:2:3", "0x1:0")]
        cases += [("mha", mha + ["--softcap", c], "--softcap") for c in ("0", "1e39", "nan")]
        cases += [("mha", mha + ["--heads", "0"], "--heads")]
        cases += [("bench", ["--window", w], "--window") for w in ("1:", "1:2:3", "0x1:0", "-2:0")]
        cases += [("bench", ["--softcap", c], "--softcap") for c in ("0", "1e39", "nan", "1e-40")]
        cases += [("bench", ["--paged", "0"], "--paged"), ("bench", ["--json", "--csv"], "--json"),
                  ("bench", ["--batch", "2", "--lengths", "1,2,3"], "--lengths"),
                  ("bench", ["--seq-q", "1,2", "--seq-k", "1,2,3"], "--seq-q"),
                  ("bench", ["--sweep", "decode", "--max-seq", "1"], "--max-seq")]
        # (--list: a value the parse let through must not start the conformance run.)
        cases += [("conform", ["--list", "--shard", s], "--shard")
                  for s in ("0/1", "2/1", "1/0", "x", "1/2/3", " 1/2", "+1/2", "-1/2", "1/", "1/99999999999999999999")]
        cases += [("conform", ["--list", "--profile", "nope"], "--profile"),
                  ("conform", ["--list", "--filter", "no-such-case"], "--filter")]
        cases += [("prepare", ["--dims", "0"], "--dims"), ("prepare", ["--dims", "64,577"], "--dims"),
                  ("prepare", ["--dtype", "f64"], "--dtype")]
        for command, args, option in cases:
            p = self.run(d, args, command)
            single, line = self.one_line(p)
            self.expect("%s %s: usage error" % (command, " ".join(repr(a) if a in ("", " 1/2") else a for a in args)),
                        p.returncode == 2 and single and option in line and not os.path.exists(os.path.join(d, "o.npy")),
                        "exit %d: %s" % (p.returncode, line))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default="build/release/tools/vkattn")
    args = parser.parse_args()
    vkattn = os.path.abspath(args.vkattn)
    is_root = os.geteuid() == 0
    root_dir = tempfile.mkdtemp(prefix="vkattn-check-out-")
    os.chmod(root_dir, 0o755)
    failures = 0
    try:
        checker = Checker(vkattn, root_dir, False)
        checker.check_all(is_root)
        failures += checker.failures
        if is_root and shutil.which("setpriv"):
            checker = Checker(vkattn, root_dir, True)
            checker.check_all(is_root)
            failures += checker.failures
        else:
            print("SKIP  the unprivileged user's run (%s)" % ("setpriv not found" if is_root else "not running as root"))
    finally:
        shutil.rmtree(root_dir, ignore_errors=True)
    print("check_output_files: %s" % ("all passed" if failures == 0 else "%d failed" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
