#!/usr/bin/env python3
"""Rounds of `vkattn bench` runs, for the alternating comparisons in bench/results/*.sh.

    vkattn bench ... --json | python3 bench/rounds.py line LABEL
        one line for one run: "LABEL median MS min MS kv_GB/s X" (the first result of the JSON)
    ... every round's lines ... | python3 bench/rounds.py summary [--sort]
        echoes the lines as they come, then per label (in order of first appearance, or sorted) the
        rounds, the median of the per-round medians, the minimum over the rounds and the median K/V
        read rate.
"""
import argparse
import collections
import json
import statistics
import sys


def line(label):
    result = json.load(sys.stdin)["results"][0]
    print(label, "median %.2f min %.2f kv_GB/s %.2f" % (result["ms_median"], result["ms_min"], result["kv_gbps"]))


def summary(sort):
    rows = collections.defaultdict(list)
    for text in sys.stdin:
        print(text, end="", flush=True)
        label, rest = text.split(" ", 1)
        fields = rest.split()
        rows[label].append((float(fields[1]), float(fields[3]), float(fields[5])))
    print()
    for label in sorted(rows) if sort else rows:
        runs = rows[label]
        print("%-20s rounds %d: median of medians %.2f ms, min %.2f ms, kv GB/s (median) %.2f" %
              (label, len(runs), statistics.median(r[0] for r in runs), min(r[1] for r in runs),
               statistics.median(r[2] for r in runs)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("line").add_argument("label")
    sub.add_parser("summary").add_argument("--sort", action="store_true")
    args = parser.parse_args()
    if args.command == "line":
        line(args.label)
    else:
        summary(args.sort)


if __name__ == "__main__":
    main()
