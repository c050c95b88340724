#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarise a softmax_bench JSON: GB/s and ratio to memcpy per implementation at a few N, and
the final step's targets (>= 0.95 x memcpy for N >= 1024, >= 0.90 below, faster than cuDNN at
every N of the same run, in GB/s and, where the run timed them in the same rounds, head to head).

    tools/bench_summary.py docs/results/bench_h100.json [--step step07_persistent]
Exit code 0 when the targets hold, 1 when they do not, 2 on bad input.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            print(f"error in {b['name']}: {b.get('error_message')}", file=sys.stderr)
            continue
        runs.setdefault(b["label"], {})[int(b["N"])] = b
    return data.get("context", {}), runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--step", default="step07_persistent", help="the step whose targets are checked")
    ap.add_argument("--cols", default="256,512,1024,2048,4096,8192,16384")
    args = ap.parse_args()
    try:
        ctx, runs = load(args.json)
    except (OSError, ValueError, KeyError) as e:
        print(f"bench_summary: cannot read {args.json}: {e}", file=sys.stderr)
        return 2
    order = [i for i in ctx.get("implementations", "").split(",") if i in runs] or sorted(runs)
    cols = [int(c) for c in args.cols.split(",")]
    print(f"{ctx.get('gpu_name', '?')}, driver {ctx.get('driver', '?')}, CUDA {ctx.get('runtime_cuda', '?')}")
    print("GB/s (ratio to memcpy), M = " + ctx.get("rows", "?"))
    print(f"{'':22}" + "".join(f"{n:>16}" for n in cols))
    for impl in order:
        cells = []
        for n in cols:
            b = runs[impl].get(n)
            cells.append(f"{b['GBps']:8.0f} ({b['ratio_to_memcpy']:4.2f})" if b else f"{'-':>16}")
        print(f"{impl:22}" + "".join(f"{c:>16}" for c in cells))

    step = runs.get(args.step)
    if not step:
        print(f"no results for {args.step}")
        return 1
    ok = True
    worst_hi = min((b["ratio_to_memcpy"], n) for n, b in step.items() if n >= 1024)
    worst_lo = min(((b["ratio_to_memcpy"], n) for n, b in step.items() if n < 1024), default=(1, 0))
    print(f"\n{args.step}: lowest ratio for N >= 1024: {worst_hi[0]:.3f} at N={worst_hi[1]} (target 0.95)")
    print(f"{args.step}: lowest ratio for N <  1024: {worst_lo[0]:.3f} at N={worst_lo[1]} (target 0.90)")
    ok = worst_hi[0] >= 0.95 and worst_lo[0] >= 0.90
    if "cudnn" in runs:
        losses = [(n, b["GBps"], runs["cudnn"][n]["GBps"]) for n, b in sorted(step.items())
                  if n in runs["cudnn"] and b["GBps"] <= runs["cudnn"][n]["GBps"]]
        print(f"{args.step}: not faster than cuDNN at {len(losses)} of {len(step)} N"
              + "".join(f"\n  N={n}: {a:.0f} vs cuDNN {c:.0f} GB/s" for n, a, c in losses[:20]))
        ok = ok and not losses
        h2h = {n: b["final_step_speedup"] for n, b in runs["cudnn"].items()
               if "final_step_speedup" in b} if ctx.get("final_step") == args.step else {}
        if h2h:  # cuDNN and the final step timed in the same rounds
            slower = [(n, x) for n, x in sorted(h2h.items()) if x <= 1.0]
            print(f"head to head (timed in the same rounds): not faster than cuDNN at {len(slower)} of "
                  f"{len(h2h)} N" + "".join(f"\n  N={n}: {x:.3f}x cuDNN's speed" for n, x in slower[:20]))
            ok = ok and not slower
    else:
        print("no cuDNN results in this run")
    print("targets " + ("MET" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
