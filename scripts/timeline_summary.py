#!/usr/bin/env python3
"""Where a decode step's wall time goes, from tools/cuda_timeline's CSV.

A step runs from one embedding kernel (`embed_kernel`, the step's first) to
the next. Kernels overlap (early starts), so a kernel's own duration says
little; its *exposed* time does: the part of its [start, end] during which
no kernel that started before it was still running. With the step's kernels
in start order and `covered` the latest end so far, exposed = max(0, end -
max(start, covered)); the exposed times of a step sum to its span (idle gaps
between kernels count for the kernel after them). Printed per kernel name: launches per step, median duration,
median start-to-previous-end gap (negative: it started early and overlapped),
exposed microseconds per step, and the share of the step.

With --prefill: the long steps instead (a prefill chunk's kernels), e.g.
--skip 1 --prefill for `bench decode`'s timed prefill (its first chunk runs
once before, cold).
usage: timeline_summary.py timeline.csv [--skip N] [--top K] [--prefill]
"""
import argparse
import collections
import csv
import re
import statistics
import sys


def short_name(mangled):
    """The kernel's own identifier out of an Itanium-mangled name (no c++filt
    on the GPU machines): the last length-prefixed name of the nested name."""
    if not mangled.startswith("_Z"):
        return mangled.split("(")[0]
    s = mangled[2:]
    if s.startswith("N"):
        s = s[1:]
    last, i = None, 0
    while i < len(s) and s[i].isdigit():
        m = re.match(r"\d+", s[i:])
        n = int(m.group(0))
        i += len(m.group(0))
        last = s[i:i + n]
        i += n
    return last or mangled


def steps_of(rows):
    step = None
    for r in rows:
        if r["short"] == "embed_kernel":
            if step:
                yield step
            step = []
        if step is not None:
            step.append(r)
    if step:
        yield step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--skip", type=int, default=2, help="steps to skip first (warm-up, graph capture)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--prefill", action="store_true", help="the long (prefill) steps instead of the decode ones")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["start"], r["end"] = int(r["start_ns"]), int(r["end_ns"])
        r["short"] = short_name(r["name"])
    rows.sort(key=lambda r: r["start"])
    steps = list(steps_of(rows))[a.skip:-1]  # the last may be cut short
    if not steps:
        sys.exit(f"no decode steps (embed_kernel) after skipping {a.skip} in {a.csv}")
    # A prefill also starts with the embedding: keep the steps of the common
    # length only (within 1.5x the median span), the decode steps.
    span_of = lambda step: max(r["end"] for r in step) - step[0]["start"]
    typical = statistics.median(span_of(s) for s in steps)
    dropped = len(steps)
    steps = [s for s in steps if (span_of(s) > 1.5 * typical) == a.prefill]
    dropped -= len(steps)
    if not steps:
        sys.exit(f"no {'prefill' if a.prefill else 'decode'} steps in {a.csv}")
    spans = []
    exposed = collections.defaultdict(float)
    durations = collections.defaultdict(list)
    gaps = collections.defaultdict(list)
    launches = collections.Counter()
    for step in steps:
        covered = step[0]["start"]
        spans.append((max(r["end"] for r in step) - step[0]["start"]) / 1e3)
        for r in step:
            exposed[r["short"]] += max(0, r["end"] - max(r["start"], covered)) / 1e3
            durations[r["short"]].append((r["end"] - r["start"]) / 1e3)
            gaps[r["short"]].append((r["start"] - covered) / 1e3)
            launches[r["short"]] += 1
            covered = max(covered, r["end"])
    n = len(steps)
    span = statistics.median(spans)
    print(f"{n} steps: median span {span:.1f} us (min {min(spans):.1f}, max {max(spans):.1f}); "
          f"{len(steps[0])} kernels in the first; {dropped} {'shorter (decode)' if a.prefill else 'longer (prefill)'} "
          "steps left out")
    print(f"{'kernel':44} {'per step':>8} {'median us':>10} {'gap us':>8} {'exposed us/step':>16} {'share':>6}")
    for name, t in sorted(exposed.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"{name[:44]:44} {launches[name] / n:8.1f} {statistics.median(durations[name]):10.2f} "
              f"{statistics.median(gaps[name]):8.2f} {t / n:16.1f} {100 * t / n / span:5.1f}%")


if __name__ == "__main__":
    main()
