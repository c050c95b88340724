# SPDX-License-Identifier: MIT
"""The renderers of plot_results.py's marker kinds: results-table, sweep-table, sweep-summary,
target-check and gpu-table, and the speed floors (FLOORS, check_targets) that target-check and
tools/bench_summary.py judge a run by. (path-gain and library-gap are in library_tables.py.)

Part of tools/plot_results.py, which re-exports every name here (import plot_results as pr).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from bench_results import (DEFAULT_JSON, FEW, GRID, IRREGULAR, LONG, NO_VALUE, NOT_MEASURED,
                           STAIRCASE_NS, SUMMARY_BINS, SWEEP_NS, SWEEP_TITLES, SWEEPS, MarkerError,
                           MissingStep, Point, Results, Shape, fmt_shape, fmt_shapes, gpu_slug,
                           load_results)
from md_tables import (extras_line, fmt_gbps, fmt_ratio, fmt_speedup, md_table, method_line,
                       parse_marker_args, skipped_note, source_line, sweeps_desc, unknown_step)

# The speed floors on the ratio to memcpy, at every point they cover: (sweep, which points,
# selector, floor), by step. The library is held to the run it must not fall below
# (tools/bench_summary.py --baseline) and to cuDNN, head to head (check_targets).
FLOORS = {
    "step07_persistent": (
        (GRID, "N >= 1024", lambda s: s[1] >= 1024, 0.93),
        (IRREGULAR, "N >= 1024", lambda s: s[1] >= 1024, 0.88),
    ),
    "step08_cluster": (
        (LONG, "N = 32768..262147", lambda s: 32768 <= s[1] <= 262147, 0.85),
        (FEW, "64x262144", lambda s: tuple(s) == (64, 262144), 0.70),
    ),
}
# The library against cuDNN, timed head to head: cuDNN's time over the library's at least this
# (cuDNN ahead by at most 2%) at every point.
CUDNN_FLOOR = 0.98


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------

def render_results_table(res: Results, args: str, md_path: Path, root: Path, n: int) -> str:
    opts, words = parse_marker_args(args, ("upto",), "results-table")
    if words:
        raise MarkerError(f"results-table: unexpected '{' '.join(words)}' (use upto=STEP)")
    all_steps = res.steps
    steps = all_steps
    if "upto" in opts:
        if opts["upto"] not in all_steps:
            raise unknown_step("results-table upto", opts["upto"], res, all_steps)
        steps = all_steps[: all_steps.index(opts["upto"]) + 1]

    notes: Dict[str, str] = {}

    def measured(name: str) -> Tuple[Optional[Point], str, str]:
        p = res.point(name, n)
        if p is None:
            err = res.error(name, n)
            if err:
                notes[f"{name} at N = {n}"] = err
            return None, NOT_MEASURED, NOT_MEASURED
        return p, fmt_gbps(p.gbps), fmt_ratio(p.ratio)

    rows = []
    for name in res.references:
        _, gbps, ratio = measured(name)
        rows.append([f"`{name}`", res.lesson(name), gbps, ratio, NO_VALUE, NO_VALUE])
    first = res.point(all_steps[0], n) if all_steps else None
    prev: Optional[Point] = None
    for i, name in enumerate(steps):
        p, gbps, ratio = measured(name)
        step_up = NO_VALUE if i == 0 else (fmt_speedup(p.gbps / prev.gbps) if p and prev else NOT_MEASURED)
        total = fmt_speedup(p.gbps / first.gbps) if p and first else NOT_MEASURED
        rows.append([f"`{name}`", res.lesson(name), gbps, ratio, step_up, total])
        prev = p

    first_name = f"`{all_steps[0]}`" if all_steps else "the first step"
    table = md_table(["step", "lesson", "GB/s", "ratio to memcpy", "speed-up over previous step",
                      f"cumulative speed-up (over {first_name})"], "llrrrr", rows)
    return "\n".join([table, *skipped_note(notes), "",
                      method_line(res, f"N = {n} columns"), "", source_line(res, md_path, root)])


def bench_jsons(root: Path) -> List[Path]:
    """Every GPU's benchmark JSON in docs/results, the main GPU's (DEFAULT_JSON's name) first."""
    found = sorted((root / "docs" / "results").glob("bench_*.json"))
    main_name = DEFAULT_JSON.name
    return sorted(found, key=lambda p: (p.name != main_name, p.name))


def render_gpu_table(args: str, md_path: Path, root: Path) -> str:
    """Each step's ratio to memcpy at N in STAIRCASE_NS on every GPU that has a JSON."""
    if args.strip():
        raise MarkerError(f"gpu-table: takes no arguments, got '{args.strip()}'")
    # Only full runs: a filtered run (no grid points at these N) is not a GPU's column group.
    runs = [r for r in (load_results(p) for p in bench_jsons(root))
            if any(r.point(s, n) for s in r.steps for n in STAIRCASE_NS)]
    if not runs:
        raise MarkerError("gpu-table: no docs/results/bench_*.json")
    steps: List[str] = []
    for r in runs:
        steps += [s for s in r.steps if s not in steps]
    header = ["step"] + [f"{gpu_slug(r.ctx('gpu_name')).upper()}, N = {n}" for r in runs
                         for n in STAIRCASE_NS]
    rows = []
    for name in steps:
        cells = [f"`{name}`"]
        for r in runs:
            for n in STAIRCASE_NS:
                p = r.point(name, n)
                cells.append(fmt_ratio(p.ratio) if p else NOT_MEASURED)
        rows.append(cells)
    table = md_table(header, "l" + "r" * (len(header) - 1), rows)
    lines = [table, "", "Ratio to a device-to-device memcpy of the same bytes, timed interleaved with "
             "the step in the same run, M = 4096 rows, float32; each GPU's own run:", ""]
    for r in runs:
        lines.append(f"- {source_line(r, md_path, root)}")
    return "\n".join(lines)


def render_sweep_table(res: Results, args: str, md_path: Path, root: Path) -> str:
    _, words = parse_marker_args(args, (), "sweep-table")
    if len(words) != 1:
        raise MarkerError("sweep-table: name exactly one step, e.g. <!-- BEGIN sweep-table step03_block -->")
    name = words[0]
    known = [s for s in res.order if s != "memcpy"]
    if name not in known:
        raise unknown_step("sweep-table", name, res, known)
    steps = res.steps
    prev_name = steps[steps.index(name) - 1] if name in steps and steps.index(name) > 0 else None

    header = ["N", "GB/s", "memcpy GB/s", "ratio to memcpy"]
    if prev_name:
        header.append(f"speed-up over `{prev_name}`")
    notes: Dict[str, str] = {}
    rows = []
    for n in SWEEP_NS:
        p = res.point(name, n)
        if p is None and res.error(name, n) is None:
            continue                       # not on this step's grid
        if p is None:
            notes[f"N = {n}"] = res.error(name, n) or ""
            ref = res.point("memcpy", n)
            row = [str(n), NOT_MEASURED, fmt_gbps(ref.gbps) if ref else NOT_MEASURED, NOT_MEASURED]
        else:
            row = [str(n), fmt_gbps(p.gbps), fmt_gbps(p.memcpy_gbps), fmt_ratio(p.ratio)]
        if prev_name:
            q = res.point(prev_name, n)
            row.append(fmt_speedup(p.gbps / q.gbps) if p and q else NO_VALUE)
        rows.append(row)
    if not rows:
        raise MissingStep(f"sweep-table: {name} has no measurement at N in {list(SWEEP_NS)}")
    table = md_table(header, "r" * len(header), rows)
    return "\n".join([table, *skipped_note(notes), "",
                      method_line(res, "N = columns per row"), "", source_line(res, md_path, root)])


@dataclass
class TargetCheck:
    """One target over one sweep: a value per point that must exceed (strict) or reach `limit`.
    A NaN value is a point that was not measured; a check with no point at all is not met."""
    sweep: str
    what: str
    limit: float
    strict: bool
    values: Dict[Shape, float]
    detail: Dict[Shape, str] = field(default_factory=dict)   # per point, e.g. '0.98 vs 0.97'

    @property
    def wanted(self) -> str:
        return f"{'>' if self.strict else '>='} {self.limit:.2f}"

    def passes(self, v: float) -> bool:
        return not math.isnan(v) and (v > self.limit if self.strict else v >= self.limit)

    @property
    def misses(self) -> List[Tuple[Shape, float]]:
        return sorted((s, v) for s, v in self.values.items() if not self.passes(v))

    @property
    def measured(self) -> List[Tuple[float, Shape]]:
        """(value, point), lowest first, the points that were measured."""
        return sorted((v, s) for s, v in self.values.items() if not math.isnan(v))

    @property
    def met(self) -> bool:
        return bool(self.values) and not self.misses


def check_targets(res: Results, step: str, extras: Sequence[Results] = ()) -> List[TargetCheck]:
    """A step's floors (FLOORS), each over every point it covers (tools/bench_summary.py uses the
    same list); for the run's final line (the library): cuDNN at most 2% ahead at every point,
    timed head to head (cuDNN's final_step_speedup), and a ratio to memcpy at least that of each
    --extra implementation at every shape both have."""
    nan = float("nan")
    checks = []
    for sweep, label, sel, limit in FLOORS.get(step, ()):
        mine = res.sweep_points(sweep, step)
        shapes = [s for s in set(mine) | set(res.sweep_errors_of(sweep, step)) if sel(s)]
        checks.append(TargetCheck(sweep, f"ratio to memcpy, {label}", limit, False,
                                  {s: mine[s].ratio if s in mine else nan for s in shapes}))
    if res.ctx("final_step", "") != step:
        return checks
    if any(res.sweep_points(sw, "cudnn") for sw in SWEEPS):
        for sweep in SWEEPS:
            theirs = res.sweep_points(sweep, "cudnn")
            if not theirs and not res.sweep_errors_of(sweep, "cudnn"):
                continue  # the sweep is not in this run
            values = {s: p.final_step_speedup for s, p in theirs.items()}
            checks.append(TargetCheck(sweep, "cuDNN's time over its own, head to head",
                                      CUDNN_FLOOR, False, values))
    for ex in extras:
        for impl in ex.order:
            if impl == "memcpy":
                continue
            for sweep in SWEEPS:
                mine, theirs = res.sweep_points(sweep, step), ex.sweep_points(sweep, impl)
                both = sorted(set(mine) & set(theirs))
                if both:
                    checks.append(TargetCheck(
                        sweep, f"ratio to memcpy over {impl}'s", 1.0, False,
                        {s: mine[s].ratio / theirs[s].ratio for s in both},
                        {s: f"{mine[s].ratio:.3f} vs {theirs[s].ratio:.3f}" for s in both}))
    return checks


def render_target_check(res: Results, extras: Sequence[Results], args: str, md_path: Path,
                        root: Path) -> str:
    """The step's speed targets (check_targets), one line per target and sweep: the worst point,
    how many points meet it, and the verdict with the points that miss."""
    _, words = parse_marker_args(args, (), "target-check")
    if len(words) != 1:
        raise MarkerError("target-check: name exactly one step, e.g. <!-- BEGIN target-check step07_persistent -->")
    name = words[0]
    if name not in res.steps:
        raise unknown_step("target-check", name, res, res.steps)
    if not any(res.sweep_points(sw, name) for sw in SWEEPS):
        raise MarkerError(f"target-check: {name} has no measurement")
    rows = []
    for c in check_targets(res, name, extras):
        if not c.values:
            rows.append([SWEEP_TITLES[c.sweep], c.what, c.wanted, NOT_MEASURED, "0 of 0",
                         "not met (not in this run)"])
            continue
        lowest = c.measured
        worst = f"{lowest[0][0]:.3f} ({fmt_shape(res, c.sweep, lowest[0][1])})" if lowest else NOT_MEASURED
        misses = [s for s, _ in c.misses]
        unmeasured = [s for s, v in c.misses if math.isnan(v)]
        where = fmt_shapes(res, c.sweep, misses) + (
            f"; not measured: {fmt_shapes(res, c.sweep, unmeasured)}" if unmeasured else "")
        rows.append([SWEEP_TITLES[c.sweep], c.what, c.wanted, worst,
                     f"{len(c.values) - len(misses)} of {len(c.values)}",
                     "met" if c.met else f"not met ({where})"])
    table = md_table(["sweep", "target", "wanted", "worst measured", "points meeting it", "verdict"],
                     "lllrrl", rows)
    return "\n".join([table, *extras_line(extras, md_path, root), "",
                      method_line(res, "", sweeps_desc(res)), "", source_line(res, md_path, root)])


def render_sweep_summary(res: Results, extras: Sequence[Results], args: str, md_path: Path,
                         root: Path) -> str:
    """Each step's, baseline's and --extra implementation's lowest and median ratio to memcpy
    over each part of each sweep (SUMMARY_BINS): one line per implementation."""
    _, words = parse_marker_args(args, (), "sweep-summary")
    if words:
        raise MarkerError(f"sweep-summary: unexpected '{' '.join(words)}' (it takes no argument)")
    lines: List[Tuple[str, Results, str]] = []    # (row label, results, implementation)
    for name in [n for n in res.references if n != "memcpy"] + res.steps:
        lines.append((f"`{name}`", res, name))
    for ex in extras:
        for name in ex.order:
            if name != "memcpy":
                version = ex.ctx("version:" + name, "")
                lines.append((f"`{name}`" + (f" {version}" if version else ""), ex, name))
    bins = [(sweep, head, sel) for sweep, head, sel in SUMMARY_BINS
            if any(sel(s) for _, r, n in lines for s in r.sweep_points(sweep, n))]
    if not bins:
        raise MarkerError(f"sweep-summary: no measurement in {res.path}")

    rows = []
    for label, r, name in lines:
        cells = []
        for sweep, _, sel in bins:
            ratios = [p.ratio for s, p in r.sweep_points(sweep, name).items() if sel(s)]
            ratios = [x for x in ratios if not math.isnan(x)]
            cells.append(f"{min(ratios):.2f} / {statistics.median(ratios):.2f}" if ratios else NO_VALUE)
        rows.append([label, *cells])
    table = md_table(["implementation", *(h for _, h, _ in bins)], "l" + "r" * len(bins), rows)

    # Implementations measured at fewer points than memcpy (the coarse subsets of step00/01).
    fewer = []
    for name in res.steps + [n for n in res.references if n != "memcpy"]:
        parts = []
        for sweep in SWEEPS:
            have, total = len(res.sweep_points(sweep, name)), len(res.sweep_points(sweep, "memcpy"))
            if total and have < total:
                parts.append(f"{SWEEP_TITLES[sweep]} {have} of {total}")
        if parts:
            fewer.append(f"`{name}` ({', '.join(parts)})")
    notes = ["", "Each cell: lowest / median ratio to memcpy over the sweep's points in that range "
             f"({NO_VALUE}: not in the run)." +
             (" Measured at fewer points: " + "; ".join(fewer) + "." if fewer else "")]
    return "\n".join([table, *notes, *extras_line(extras, md_path, root), "",
                      method_line(res, "", sweeps_desc(res)), "", source_line(res, md_path, root)])
