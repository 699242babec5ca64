#!/usr/bin/env python3
"""`vkattn conform` end to end: the quick sweep passes and reports what it ran, filters select what
they say, and bad input gives one error line and a non-zero exit.

The kernels' correctness itself is the conformance suites' business (the same catalog and runner);
this checks the command around them.

    /usr/bin/python3 tests/cli/check_conform.py --vkattn build/release/tools/vkattn
"""
import argparse
import json
import subprocess
import sys

PATHS = ["fused/tiled", "fused/rowwise", "fused/subgroup", "unfused"]


def run(vkattn, *args):
    return subprocess.run([vkattn, "conform", *args], capture_output=True, text=True)


class Checker:
    def __init__(self):
        self.failures = 0

    def expect(self, ok, what):
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        self.failures += 0 if ok else 1


def one_error_line(done):
    lines = done.stderr.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("vkattn: error: ")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vkattn", default="build/release/tools/vkattn")
    args = parser.parse_args()
    c = Checker()
    version = subprocess.run([args.vkattn, "--version"], capture_output=True, text=True).stdout.split()[-1]

    quick_ids = run(args.vkattn, "--quick", "--list").stdout.split("\n")
    quick_ids = [line.split()[0] for line in quick_ids if line.strip()]
    done = run(args.vkattn, "--quick", "--json")
    c.expect(done.returncode == 0, f"--quick passes (exit {done.returncode}; {done.stderr.strip()[:200]})")
    c.expect(done.stderr == "", "nothing on stderr when it is not a terminal and all pass")
    report = json.loads(done.stdout)
    c.expect(report["device"] != "" and report["driver"] != "", f"the report names the device: {report['device']}")
    c.expect(report["vkattn"] == version, f"the report names the library version {version}")
    c.expect(report["quick"] is True and report["paths"] == PATHS, "quick, on every path")
    summary = report["summary"]
    c.expect(summary["cases"] == len(quick_ids) and summary["runs"] == len(quick_ids) * len(PATHS) and
             summary["failed"] == 0 and summary["passed"] + summary["skipped"] == summary["runs"],
             f"{len(quick_ids)} cases x {len(PATHS)} paths = runs, none failed: {summary}")
    c.expect(len(report["runs"]) == summary["runs"] and report["failures"] == [], "every case run listed")
    c.expect(0 < summary["worst"] < 1, f"the worst error is a fraction of its tolerance: {summary['worst']:.3g}")
    groups = report["groups"]
    for group, values in (("path", PATHS), ("dtype", ["f32", "f16", "bf16"]),
                          ("mask", ["causal top-left", "causal bottom-right", "key padding", "combined"]),
                          ("heads", ["MHA", "MQA"]), ("layout", ["bhsd", "bshd", "padded"])):
        seen = {row["value"] for row in groups.get(group, [])}
        c.expect(set(values) <= seen, f"group {group} covers {values}")
    c.expect(all(row["runs"] == row["passed"] + row["failed"] + row["skipped"]
                 for rows in groups.values() for row in rows), "every group row adds up")
    skipped = [x for x in report["runs"] if x["outcome"] == "skipped"]
    c.expect(all(x.get("skip_reason") for x in skipped) and
             not any("skip_reason" in x for x in report["runs"] if x["outcome"] != "skipped"),
             f"each of the {len(skipped)} skipped runs says why, and only those")

    # Another device class's plans: a paged case and a packed one run with them; the subgroup
    # kernel's runs planned for 32 lanes are skipped here (8 lanes on lavapipe), the reason printed.
    done = run(args.vkattn, "--profile", "h100", "--filter", "paged/0", "--filter", "varlen/0", "--path", "fused-tiled",
               "--path", "unfused", "--json")
    prof = json.loads(done.stdout) if done.returncode == 0 else {"runs": []}
    c.expect(sorted((x["id"], x["path"], x["outcome"]) for x in prof["runs"]) ==
             [("paged/0", "fused/tiled", "passed"), ("paged/0", "unfused", "passed"),
              ("varlen/0", "fused/tiled", "passed"), ("varlen/0", "unfused", "passed")],
             f"--profile h100 runs paged and packed cases with its plans: {prof['runs']}")
    done = run(args.vkattn, "--profile", "h100", "--filter", "representative/0", "--path", "fused-subgroup")
    c.expect(done.returncode == 0 and "skipped runs, by reason" in done.stdout and
             "planned for 32-lane subgroups" in done.stdout,
             "the table report gives each skip's reason: "
             + next((line.strip() for line in done.stdout.splitlines() if "32-lane subgroups" in line), "(none)"))

    done = run(args.vkattn, "--filter", "sweep-f16/3", "--path", "unfused", "--json")
    one = json.loads(done.stdout) if done.returncode == 0 else {"runs": []}
    c.expect([(x["id"], x["path"]) for x in one["runs"]] == [("sweep-f16/3", "unfused")],
             "--filter ID --path unfused runs that one case on that path")
    done = run(args.vkattn, "--filter", "representative/0", "--path", "fused-auto", "--json")
    auto = json.loads(done.stdout) if done.returncode == 0 else {"runs": [], "paths": []}
    c.expect(auto["paths"] == ["fused/auto"] and [(x["id"], x["path"], x["outcome"]) for x in auto["runs"]] ==
             [("representative/0", "fused/auto", "passed")],
             f"--path fused-auto runs the kernel the plan picks, as its own path: {auto['runs']}")
    done = run(args.vkattn, "--filter", "masks-*", "--list")
    ids = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    c.expect(done.returncode == 0 and ids and all(i.startswith("masks-") for i in ids),
             f"--filter 'masks-*' selects the mask sections ({len(ids)} cases)")
    done = run(args.vkattn, "--filter", "representative/0", "--path", "fused")
    c.expect(done.returncode == 0 and "3 runs (1 case on 3 paths): 3 passed" in done.stdout and "dtype" in done.stdout,
             "the table report, fused = the three fused kernels")
    shards = []
    three = ["representative/0", "representative/1", "representative/2"]
    for shard in ("1/3", "2/3", "3/3"):
        done = run(args.vkattn, "--filter", *three, "--path", "fused-tiled,unfused", "--shard", shard, "--json")
        shards.append([(x["id"], x["path"]) for x in json.loads(done.stdout)["runs"]] if done.returncode == 0 else [])
    c.expect(shards == [[(i, "fused/tiled"), (i, "unfused")] for i in three],
             f"--shard K/3 runs the K-th third of the cases on every path: {shards}")

    # All usage errors (issue 37): exit 2, like CLI11's own.
    for bad, code in ((["--filter", "no-such-case"], 2), (["--path", "sideways"], 2), (["--seed", "x"], 2),
                      (["--shard", "0/2"], 2), (["--shard", "2"], 2),
                      (["--filter", "representative/0", "--path", "unfused", "--shard", "1/2"], 2)):
        done = run(args.vkattn, *bad)
        c.expect(done.returncode == code and one_error_line(done) and done.stdout == "",
                 f"{' '.join(bad)}: one error line, exit {code} (got {done.returncode}: {done.stderr.strip()})")

    print(f"{c.failures} failures")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
