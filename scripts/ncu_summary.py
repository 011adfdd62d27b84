#!/usr/bin/env python3
"""Summarises an Nsight Compute CSV (scripts/gpu_check.sh, NCU=1): the last
decode step's kernels in launch order, then totals per kernel name.

Usage: ncu_summary.py FILE.csv  (ncu --csv --print-units base --metrics ...)
A kernel's share of the step is its GPU time (ncu runs kernels one at a
time: launch gaps are not in these figures).
"""
import csv
import re
import sys
from collections import OrderedDict


def short(name):
    name = re.sub(r"\(.*", "", name)           # argument list
    name = re.sub(r"^.*::", "", name)          # namespaces
    return name[:40]


def main(path):
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines too
    for r in csv.DictReader(lines):
        rows.append(r)
    if not rows:
        print(f"{path}: no kernels")
        return
    # One record per (launch ID, metric) -> pivot per launch.
    launches = OrderedDict()
    for r in rows:
        key = r["ID"]
        d = launches.setdefault(key, {"name": r["Kernel Name"], "grid": r.get("Grid Size", ""),
                                      "block": r.get("Block Size", "")})
        try:
            d[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            pass
    ks = list(launches.values())
    # One whole decode step: between the last two embedding kernels (a step
    # starts with one), before the benchmark's own ceiling measurements
    # (fill_random_kernel and cuBLASLt's GEMMs after it).
    end = next((i for i, k in enumerate(ks) if "fill_random" in k["name"]), len(ks))
    starts = [i for i, k in enumerate(ks[:end]) if "embed" in k["name"]]
    if len(starts) >= 2:
        step = ks[starts[-2]:starts[-1]]
    else:
        step = ks[starts[-1] if starts else 0:end]
    total = sum(k.get("gpu__time_duration.sum", 0) for k in step) / 1e3
    print(f"{path}: {len(ks)} kernels profiled; the last step: {len(step)} kernels, {total:.1f} us of GPU time")
    print(f"  {'kernel':40} {'grid':>14} {'regs':>4} {'occ%':>5} {'us':>8} {'MB read':>8} {'GB/s':>7}")
    for k in step:
        us = k.get("gpu__time_duration.sum", 0) / 1e3
        rd = k.get("dram__bytes_read.sum", 0)
        print(f"  {short(k['name']):40} {k['grid']:>14} {k.get('launch__registers_per_thread', 0):4.0f} "
              f"{k.get('sm__warps_active.avg.pct_of_peak_sustained_active', 0):5.1f} {us:8.2f} {rd / 1e6:8.2f} "
              f"{(rd / (us * 1e3) if us > 0 else 0):7.0f}")
    totals = OrderedDict()
    for k in step:
        t = totals.setdefault(short(k["name"]), [0, 0.0, 0.0])
        t[0] += 1
        t[1] += k.get("gpu__time_duration.sum", 0) / 1e3
        t[2] += k.get("dram__bytes_read.sum", 0)
    print(f"  per kernel name, the same step:")
    for name, (n, us, rd) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:40} {n:4d} launches {us:9.1f} us {100 * us / total:5.1f} %  {rd / (us * 1e3):6.0f} GB/s")


if __name__ == "__main__":
    main(sys.argv[1])
