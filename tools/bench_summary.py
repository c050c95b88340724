#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summarise a softmax_bench JSON and compute the verdict on the speed floors and tolerances.

Prints GB/s (ratio to memcpy) per implementation at a few N of the grid, each short-rows shape,
and every implementation's lowest / median ratio over each sweep, and lists the timings whose
median lies more than 5% over their own minimum (disturbed). Then checks, each at every point it
covers (tools/plot_results.py FLOORS and check_targets):

  - step07_persistent: ratio to memcpy >= 0.93 on the grid at N >= 1024 and >= 0.88 on the
    irregular sweep at N >= 1024;
  - step08_cluster: >= 0.85 on the long rows of 32768-262147 floats, >= 0.70 at 64x262144;
  - the library (the run's final line, fastsoftmax): cuDNN's time over its own >= 0.98 at every
    point, timed head to head (cuDNN at most 2% ahead; not checked without cuDNN); with --extra
    FILE (tools/torch_softmax_bench.py's JSON; repeatable) a ratio to memcpy at least that of
    every implementation in it at every shape both have;
  - with --baseline FILE (a softmax_bench JSON of an earlier run, e.g. the one the library must
    not fall below): for each sweep, the library's median ratio to memcpy is at most 0.015 below
    the baseline's final line's median (the few-rows sweep: 0.06, its median moved by that much
    between runs of the same plan), and its lowest at most 0.04 below the baseline's lowest;
  - with --scan FILE (tools/shape_scan.cpp's JSON): no shape failed verification, and cuDNN was
    ahead of the library by more than 2% at none.

A sweep missing from the JSON, or a point a step skipped, counts as a miss.

    tools/bench_summary.py docs/results/bench_h200.json [--baseline FILE] [--scan FILE]
                           [--extra docs/results/torch_h200.json] [--cols 256,512,...]
Exit code 0 when every check holds, 1 when one does not, 2 on bad input.
"""
import argparse
import json
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


BASELINE_MEDIAN_SLACK = {pr.FEW: 0.06}  # per sweep; 0.015 for the others
BASELINE_MEDIAN_DEFAULT = 0.015
BASELINE_MIN_SLACK = 0.04


def check_baseline(res, base, step):
    """The library against the baseline run's final line, sweep by sweep: median and lowest ratio
    to memcpy. Returns True when every sweep is within the tolerances."""
    theirs_name = base.ctx("final_step", "")
    print(f"\n{step} against {theirs_name} of {base.path.name} (commit {base.ctx('commit', '?')}, "
          f"{base.ctx('gpu_name', '?')}):")
    ok = True
    for sweep in pr.SWEEPS:
        theirs = [p.ratio for p in base.sweep_points(sweep, theirs_name).values()]
        if not theirs:
            continue
        mine_pts = res.sweep_points(sweep, step)
        missing = set(base.sweep_points(sweep, theirs_name)) - set(mine_pts)
        mine = [p.ratio for p in mine_pts.values()]
        if not mine or missing:
            print(f"  MISS  {pr.SWEEP_TITLES[sweep]}: {len(missing)} of the baseline's points not measured")
            ok = False
            continue
        slack = BASELINE_MEDIAN_SLACK.get(sweep, BASELINE_MEDIAN_DEFAULT)
        med_ok = statistics.median(mine) >= statistics.median(theirs) - slack
        min_ok = min(mine) >= min(theirs) - BASELINE_MIN_SLACK
        ok = ok and med_ok and min_ok
        print(f"  {'ok  ' if med_ok and min_ok else 'MISS'}  {pr.SWEEP_TITLES[sweep]}: median "
              f"{statistics.median(mine):.3f} against {statistics.median(theirs):.3f} "
              f"(at most {slack} below: {'met' if med_ok else 'not met'}); lowest {min(mine):.3f} "
              f"against {min(theirs):.3f} (at most {BASELINE_MIN_SLACK} below: "
              f"{'met' if min_ok else 'not met'})")
    return ok


def check_scan(path):
    """The shape scan's JSON: every shape verified or too large to verify, none failed; cuDNN
    ahead by more than 2% at none. Returns True when both hold."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise pr.ToolError(f"{path}: {e}")
    shapes = doc.get("shapes", [])
    if any("fastsoftmax_us" not in s for s in shapes):
        raise pr.ToolError(f"{path}: shapes without fastsoftmax_us (a scan of an older build?)")
    failed = [s for s in shapes if s.get("verified") == "FAILED"]
    unverified = [s for s in shapes if s.get("verified") == "no"]
    ahead = [s for s in shapes if "cudnn_us" in s and s["cudnn_us"] / s["fastsoftmax_us"] < pr.CUDNN_FLOOR]
    print(f"\nshape scan {Path(path).name} (seed {doc.get('seed')}, {len(shapes)} shapes, "
          f"commit {doc.get('commit', '?')}):")
    print(f"  {'ok  ' if not failed else 'MISS'}  verified: {len(shapes) - len(unverified) - len(failed)}"
          f" passed, {len(failed)} failed, {len(unverified)} past 2^25 elements timed only")
    worst = min(((s["cudnn_us"] / s["fastsoftmax_us"], s) for s in shapes if "cudnn_us" in s),
                default=None, key=lambda t: t[0])
    if worst is None:
        print("  note  no cuDNN in the scan: not compared")
    else:
        print(f"  {'ok  ' if not ahead else 'MISS'}  cuDNN ahead by more than 2% at {len(ahead)} "
              f"shapes; lowest cuDNN time / library time {worst[0]:.3f} at "
              f"{worst[1]['rows']}x{worst[1]['cols']}")
    return not failed and not ahead


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", type=Path)
    ap.add_argument("--baseline", type=Path, help="a softmax_bench JSON the library must not fall below")
    ap.add_argument("--scan", type=Path, help="a shape scan JSON (tools/shape_scan.cpp)")
    ap.add_argument("--extra", type=Path, action="append", default=[], metavar="FILE",
                    help="a JSON of tools/torch_softmax_bench.py to compare with (repeatable)")
    ap.add_argument("--cols", default="256,512,1024,2048,4096,8192,16384",
                    help="grid row lengths of the first table")
    args = ap.parse_args()
    try:
        res = pr.load_results(args.json)
        extras = [pr.load_results(p) for p in args.extra]
        base = pr.load_results(args.baseline) if args.baseline else None
        cols = [int(c) for c in args.cols.split(",")]
    except (pr.ToolError, ValueError) as e:
        print(f"bench_summary: {e}", file=sys.stderr)
        return 2
    final = res.ctx("final_step", "fastsoftmax")
    print_tables(res, cols)
    report_spread(res)

    ok = True
    for step in [s for s in pr.FLOORS if s != final] + [final]:
        if not any(res.sweep_points(sw, step) for sw in pr.SWEEPS):
            print(f"\nMISS  no results for {step}")
            ok = False
            continue
        checks = pr.check_targets(res, step, extras if step == final else ())
        if not checks:
            continue
        print(f"\n{step}:")
        for check in checks:
            ok = report_check(res, step, check, closest=3 if check.detail else 0) and ok
        if step == final and not any(res.sweep_points(sw, "cudnn") for sw in pr.SWEEPS):
            print("  note  no cuDNN in this run: the head-to-head check is not made")
    if base is not None:
        ok = check_baseline(res, base, final) and ok
    if args.scan:
        try:
            ok = check_scan(args.scan) and ok
        except pr.ToolError as e:
            print(f"bench_summary: {e}", file=sys.stderr)
            return 2
    print("\nverdict: every floor and tolerance " + ("MET" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
