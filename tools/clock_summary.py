#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarise the GPU clock log that tools/reproduce.sh records during the benchmark.

    python3 tools/clock_summary.py docs/results/gpu_clocks_h200.csv [--parts 4]

The log is nvidia-smi's CSV (timestamp, clocks.sm, clocks.mem, temperature.gpu,
temperature.memory, power.draw, clocks_event_reasons.active), a sample every 5 seconds. The run is
cut into --parts equal stretches of time (the benchmark runs its sweeps in the order grid,
irregular, short, long, few, so the last stretch holds the few-rows sweep); for each: the SM and
memory clocks (min / median / max, MHz), the GPU and memory temperatures (max, C), the power
(median / max, W) and the clock-event reasons reported, as nvidia-smi's bit masks.
"""
import argparse
import csv
import statistics
import sys
from datetime import datetime
from pathlib import Path


def number(text: str) -> float:
    """'1980 MHz' -> 1980.0; 'N/A' or '[N/A]' -> nan."""
    head = text.strip().split(" ")[0]
    try:
        return float(head)
    except ValueError:
        return float("nan")


def read(path: Path):
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2:
        raise ValueError(f"{path}: no samples")
    names = [c.strip() for c in rows[0]]
    samples = []
    for r in rows[1:]:
        if len(r) != len(names):
            continue  # a line cut off when the logger was stopped
        d = dict(zip(names, (c.strip() for c in r)))
        try:
            d["_t"] = datetime.strptime(d[names[0]], "%Y/%m/%d %H:%M:%S.%f")
        except ValueError:
            continue
        samples.append(d)
    if not samples:
        raise ValueError(f"{path}: no readable samples")
    return names, samples


def column(samples, prefix):
    for key in samples[0]:
        if key.startswith(prefix):
            values = [number(s[key]) for s in samples]
            return [v for v in values if v == v]
    return []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--parts", type=int, default=4, help="stretches of time (default 4)")
    args = ap.parse_args(argv)
    if args.parts < 1:
        print("clock_summary.py: --parts must be >= 1", file=sys.stderr)
        return 2
    try:
        names, samples = read(args.csv)
    except (OSError, ValueError) as e:
        print(f"clock_summary.py: {e}", file=sys.stderr)
        return 1
    t0, t1 = samples[0]["_t"], samples[-1]["_t"]
    span = max((t1 - t0).total_seconds(), 1e-9)
    reason_key = next((k for k in names if "reasons" in k), None)
    print(f"GPU clock log {args.csv}: {len(samples)} samples over {span:.0f} s")
    print("  part  seconds    SM MHz min/med/max   mem MHz min/max  GPU C max  mem C max"
          "  W med/max  reasons")
    for i in range(args.parts):
        lo, hi = span * i / args.parts, span * (i + 1) / args.parts
        part = [s for s in samples
                if lo <= (s["_t"] - t0).total_seconds() < hi or
                (i == args.parts - 1 and (s["_t"] - t0).total_seconds() == span)]
        if not part:
            continue
        sm, mem = column(part, "clocks.current.sm"), column(part, "clocks.current.memory")
        gpu_t, mem_t = column(part, "temperature.gpu"), column(part, "temperature.memory")
        power = column(part, "power.draw")
        reasons = sorted({s[reason_key] for s in part}) if reason_key else []

        def mmm(v):
            return (f"{min(v):.0f}/{statistics.median(v):.0f}/{max(v):.0f}" if v else "n/a")

        print(f"  {i + 1:>4}  {lo:>3.0f}-{hi:<3.0f}  {mmm(sm):>19}  "
              f"{(f'{min(mem):.0f}/{max(mem):.0f}' if mem else 'n/a'):>15}  "
              f"{(f'{max(gpu_t):.0f}' if gpu_t else 'n/a'):>9}  "
              f"{(f'{max(mem_t):.0f}' if mem_t else 'n/a'):>9}  "
              f"{(f'{statistics.median(power):.0f}/{max(power):.0f}' if power else 'n/a'):>9}  "
              f"{' '.join(reasons)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
