#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarise a softmax_bench JSON and check the final step's targets.

Prints GB/s (ratio to memcpy) per implementation at a few N of the grid, each short-rows shape,
and every implementation's lowest / median ratio over each sweep, and lists the timings whose
median lies more than 5% over their own minimum (disturbed); then checks the final step's
targets (tools/plot_results.py check_targets, the same list its target-check block renders):

  - ratio to memcpy >= 0.95 at every N >= 1024 and >= 0.90 below, on the grid (M = 4096,
    N = 128*i) and on the irregular sweep (M = 4096, N = 97*k); >= 0.95 at every short-rows shape;
  - faster than cuDNN head to head at every point of every sweep (cuDNN's final_step_speedup > 1;
    GB/s against GB/s for an older JSON without it); not checked when the run has no cuDNN;
  - with --extra FILE (tools/torch_softmax_bench.py's JSON; repeatable): a ratio to memcpy at least
    that of every implementation in it (torch, triton) at every shape both have. Each ratio is
    against the memcpy timed beside it in its own program; the closest margins are printed.

A sweep missing from the JSON, or a point the step skipped, counts as a miss.

    tools/bench_summary.py docs/results/bench_h100.json [--extra docs/results/torch_h100.json]
                           [--step step07_persistent] [--cols 256,512,...]
Exit code 0 when every target holds, 1 when one does not, 2 on bad input.
"""
import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (the loader and the targets)

SPREAD_LIMIT = 0.05  # a median this far over its own minimum is listed as a disturbed timing


def over_minimum(point):
    """How far a timing's median lies over its own minimum (0.05 = 5%); NaN without a minimum."""
    return point.median_us / point.min_us - 1 if point.min_us > 0 else float("nan")


def shape_text(res, sweep, shape):
    return pr.fmt_shape(res, sweep, shape, times="x").replace("N = ", "N=")


def print_tables(res, cols):
    print(f"{res.ctx('gpu_name', '?')}, driver {res.ctx('driver', '?')}, CUDA {res.ctx('runtime_cuda', '?')}, "
          f"commit {res.ctx('commit', '?')}")
    impls = [n for n in res.order if any(res.sweep_points(sw, n) for sw in pr.SWEEPS)]

    print(f"\ngrid: GB/s (ratio to memcpy), M = {res.rows}")
    print(f"{'':22}" + "".join(f"{n:>16}" for n in cols))
    for impl in impls:
        cells = [f"{p.gbps:8.0f} ({p.ratio:4.2f})" if p else "-"
                 for p in (res.point(impl, n) for n in cols)]
        print(f"{impl:22}" + "".join(f"{c:>16}" for c in cells))

    shapes = sorted({s for pts in res.sweeps.get(pr.SHORT, {}).values() for s in pts},
                    key=lambda s: (s[1], s[0]))
    if shapes:
        print("\nshort rows: GB/s (ratio to memcpy)")
        print(f"{'':22}" + "".join(f"{f'{m}x{n}':>16}" for m, n in shapes))
        for impl in impls:
            pts = res.sweep_points(pr.SHORT, impl)
            cells = [f"{pts[s].gbps:8.0f} ({pts[s].ratio:4.2f})" if s in pts else "-" for s in shapes]
            print(f"{impl:22}" + "".join(f"{c:>16}" for c in cells))

    bins = [b for b in pr.SUMMARY_BINS if any(res.sweep_points(b[0], i) for i in impls)]
    print("\nlowest / median ratio to memcpy over each sweep")
    print(f"{'':22}" + "".join(f"{h.replace('≥', '>='):>22}" for _, h, _ in bins))
    for impl in impls:
        cells = []
        for sweep, _, sel in bins:
            r = [p.ratio for s, p in res.sweep_points(sweep, impl).items() if sel(s) and not math.isnan(p.ratio)]
            cells.append(f"{min(r):.3f} / {statistics.median(r):.3f}" if r else "-")
        print(f"{impl:22}" + "".join(f"{c:>22}" for c in cells))


def report_check(res, step, check, closest):
    """Prints one target's verdict, every miss with its margin, and with `closest` the points
    nearest the limit. Returns True when it is met."""
    where = pr.SWEEP_TITLES[check.sweep]
    if not check.values:
        print(f"  MISS  {where}: {check.what} {check.wanted}: the sweep is not in this run")
        return False
    lowest = check.measured
    n_ok = len(check.values) - len(check.misses)
    worst = f"worst {lowest[0][0]:.3f} at {shape_text(res, check.sweep, lowest[0][1])}" if lowest else "nothing measured"
    print(f"  {'ok  ' if check.met else 'MISS'}  {where}: {check.what} {check.wanted}: {worst}; "
          f"{n_ok} of {len(check.values)} points meet it")
    for shape, v in check.misses:
        at = shape_text(res, check.sweep, shape)
        if math.isnan(v):
            err = res.sweep_errors_of(check.sweep, step).get(shape, "no entry")
            print(f"          {at}: not measured ({err})")
        else:
            extra = f" ({check.detail[shape]})" if shape in check.detail else ""
            point = res.sweep_points(check.sweep, step).get(shape)
            spread = ""
            if point and not math.isnan(over_minimum(point)):
                spread = f"; {step}'s median {100 * over_minimum(point):.1f}% over its minimum"
            print(f"          {at}: {v:.4f}{extra}, margin {v - check.limit:+.4f}{spread}")
    if closest and check.met:
        near = ", ".join(f"{shape_text(res, check.sweep, s)}: {v:.3f}"
                         + (f" ({check.detail[s]})" if s in check.detail else "")
                         for v, s in lowest[:closest])
        print(f"          closest: {near}")
    return check.met


def report_spread(res, limit=SPREAD_LIMIT):
    """Lists the timings whose median lies more than `limit` over their own minimum: a sign that
    something else ran on the GPU or its clocks moved during that point (a steady kernel's median
    is within 1-3% of its minimum)."""
    wide = []
    for sweep in pr.SWEEPS:
        for impl, pts in res.sweeps.get(sweep, {}).items():
            for shape, p in pts.items():
                if over_minimum(p) > limit:  # False for NaN
                    wide.append((over_minimum(p), impl, sweep, shape))
    print(f"\ntimings whose median is more than {100 * limit:.0f}% over their minimum: {len(wide)}")
    for over, impl, sweep, shape in sorted(wide, reverse=True):
        print(f"  {impl:22} {pr.SWEEP_TITLES[sweep]:11} {shape_text(res, sweep, shape):14} {100 * over:5.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", type=Path)
    ap.add_argument("--step", help="the step whose targets are checked (default: the JSON's final_step)")
    ap.add_argument("--extra", type=Path, action="append", default=[], metavar="FILE",
                    help="a JSON of tools/torch_softmax_bench.py to compare with (repeatable)")
    ap.add_argument("--cols", default="256,512,1024,2048,4096,8192,16384",
                    help="grid row lengths of the first table")
    args = ap.parse_args()
    try:
        res = pr.load_results(args.json)
        extras = [pr.load_results(p) for p in args.extra]
        cols = [int(c) for c in args.cols.split(",")]
    except (pr.ToolError, ValueError) as e:
        print(f"bench_summary: {e}", file=sys.stderr)
        return 2
    step = args.step or res.ctx("final_step", "step07_persistent")
    print_tables(res, cols)

    if not any(res.sweep_points(sw, step) for sw in pr.SWEEPS):
        print(f"\nno results for {step}")
        return 1
    report_spread(res)
    checks = pr.check_targets(res, step, extras)
    print(f"\ntargets of {step}:")
    ok = True
    for check in checks:
        ok = report_check(res, step, check, closest=3 if check.detail else 0) and ok
    if not any(res.sweep_points(sw, "cudnn") for sw in pr.SWEEPS):
        print("  note  no cuDNN in this run: the head-to-head target is not checked")
    for ex in extras:
        for impl in (n for n in ex.order if n != "memcpy"):
            if not any(set(res.sweep_points(sw, step)) & set(ex.sweep_points(sw, impl)) for sw in pr.SWEEPS):
                print(f"  note  {impl} ({ex.path.name}) shares no shape with {step}: not compared")
    print("targets " + ("MET" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
