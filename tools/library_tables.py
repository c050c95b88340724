#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The library's tables, from softmax_bench's JSON (tools/plot_results.py registers them):

  <!-- BEGIN path-gain -->            one line per path of the library (fastsoftmax::describe, as
  <!-- END path-gain -->              recorded in the JSON's fastsoftmax_paths): the points of the
                                      sweeps it takes, its ratio to memcpy there, and its gain over
                                      the lessons (a lesson's median time over the library's)
  <!-- BEGIN library-gap STEP -->     where lesson STEP trails the library by more than 3%: by
  <!-- END library-gap -->            sweep and the library's path, how many points, both ratios
                                      to memcpy and the gain, with the worst point
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Dict, List, Tuple

import plot_results as pr

LIBRARY = "fastsoftmax"
GAP = 1.03  # a lesson "trails" where its median time is more than 3% over the library's

# What each path is, for a reader of the tables (docs/library.md, "The path table", says why).
PATH_TEXT = {
    "single": "rows of one float as one vector",
    "pairs": "rows of two floats, two rows a float4",
    "tiles": "tiles of short rows through shared memory",
    "sub_warp": "1-32 lanes a row",
    "half_warp": "16 lanes a row, one wave",
    "strided": "a warp a row, 4-byte accesses",
    "warp": "a warp a row, 2-9 float4 a lane",
    "block": "a block a row, in registers",
    "smem_block": "a block a row, in shared memory",
    "two_pass": "a block a row, read twice",
    "two_pass_scalar": "x, y aligned apart: 4-byte accesses",
    "cluster": "a cluster of K CTAs a row, DSMEM exchange",
    "cluster_held": "a cluster a row, half of each part in shared memory",
    "grid": "K CTAs of a cooperative grid a row",
    "grid_held": "grid parts half held in shared memory, one round",
}


def library_paths(res: pr.Results) -> Dict[Tuple[str, pr.Shape], str]:
    """(sweep, (M, N)) -> the library's path, from the JSON's fastsoftmax_paths context."""
    text = res.ctx("fastsoftmax_paths", "")
    if not text:
        raise pr.MarkerError(f"{res.path}: no fastsoftmax_paths context (a run of an older "
                             "softmax_bench?)")
    paths = {}
    for item in text.split(";"):
        where, path = item.split("=")
        sweep, shape = where.split("/")
        m, n = shape.split("x")
        paths[(sweep, (int(m), int(n)))] = path
    return paths


def gain(res: pr.Results, sweep: str, lesson: str, shape: pr.Shape) -> float:
    """The lesson's median time over the library's at one point (> 1: the library faster)."""
    mine = res.sweep_points(sweep, LIBRARY).get(shape)
    theirs = res.sweep_points(sweep, lesson).get(shape)
    if not mine or not theirs:
        return float("nan")
    return theirs.median_us / mine.median_us


def fmt_range(values: List[float], fmt: str = "{:.2f}") -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return pr.NOT_MEASURED
    lo, med, hi = min(values), statistics.median(values), max(values)
    return f"{fmt.format(med)} ({fmt.format(lo)}-{fmt.format(hi)})"


def render_path_gain(res: pr.Results, args: str, md_path: Path, root: Path) -> str:
    pr.parse_marker_args(args, (), "path-gain")
    paths = library_paths(res)
    lessons = [s for s in ("step07_persistent", "step08_cluster") if s in res.order]
    by_path: Dict[str, List[Tuple[str, pr.Shape]]] = {}
    for (sweep, shape), path in paths.items():
        if shape in res.sweep_points(sweep, LIBRARY):
            by_path.setdefault(path, []).append((sweep, shape))
    rows = []
    for path in PATH_TEXT:
        points = by_path.get(path, [])
        if not points:
            rows.append([f"`{path}`", PATH_TEXT[path], "none"] + [pr.NO_VALUE] * (1 + len(lessons)))
            continue
        sweeps = sorted({sw for sw, _ in points}, key=pr.SWEEPS.index)
        where = ", ".join(f"{pr.SWEEP_TITLES[sw]} {sum(1 for s, _ in points if s == sw)}"
                          for sw in sweeps)
        ratios = [res.sweep_points(sw, LIBRARY)[sh].ratio for sw, sh in points]
        cells = [f"`{path}`", PATH_TEXT[path], where, fmt_range(ratios)]
        for lesson in lessons:
            cells.append(fmt_range([gain(res, sw, lesson, sh) for sw, sh in points], "{:.2f}×"))
        rows.append(cells)
    table = pr.md_table(["path", "mapping", "points of the sweeps it takes",
                         "fastsoftmax: ratio to memcpy, median (range)"] +
                        [f"gain over `{l}`, median (range)" for l in lessons],
                        "lllr" + "r" * len(lessons), rows)
    note = ("Gain: the lesson's median time over the library's at the same point, both timed "
            "beside a memcpy in the same run (> 1: the library is faster). Paths that take no "
            "point of the sweeps are exercised by the tests and the shape scan.")
    return "\n".join([table, "", note, "", pr.method_line(res, "", pr.sweeps_desc(res)), "",
                      pr.source_line(res, md_path, root)])


def render_library_gap(res: pr.Results, args: str, md_path: Path, root: Path) -> str:
    _, words = pr.parse_marker_args(args, (), "library-gap")
    if len(words) != 1:
        raise pr.MarkerError("library-gap: name exactly one step, e.g. "
                             "<!-- BEGIN library-gap step07_persistent -->")
    lesson = words[0]
    if lesson not in res.steps:
        raise pr.unknown_step("library-gap", lesson, res, res.steps)
    paths = library_paths(res)
    groups: Dict[Tuple[str, str], List[pr.Shape]] = {}
    total = 0
    for sweep in pr.SWEEPS:
        for shape in res.sweep_points(sweep, LIBRARY):
            if shape not in res.sweep_points(sweep, lesson):
                continue
            total += 1
            if gain(res, sweep, lesson, shape) > GAP:
                groups.setdefault((sweep, paths.get((sweep, shape), "?")), []).append(shape)
    rows = []
    for (sweep, path), shapes in sorted(groups.items(),
                                        key=lambda kv: (pr.SWEEPS.index(kv[0][0]), kv[0][1])):
        gains = [gain(res, sweep, lesson, s) for s in shapes]
        worst = shapes[gains.index(max(gains))]
        rows.append([pr.SWEEP_TITLES[sweep], f"`{path}`: {PATH_TEXT.get(path, '')}",
                     str(len(shapes)),
                     fmt_range([res.sweep_points(sweep, lesson)[s].ratio for s in shapes]),
                     fmt_range([res.sweep_points(sweep, LIBRARY)[s].ratio for s in shapes]),
                     fmt_range(gains, "{:.2f}×"),
                     f"{pr.fmt_shape(res, sweep, worst)} ({max(gains):.2f}×)"])
    trailing = sum(len(v) for v in groups.values())
    if not rows:
        body = f"`{lesson}` is within 3% of the library at every one of the {total} points."
    else:
        body = pr.md_table(["sweep", "the library's path there", "points",
                            f"`{lesson}`: ratio to memcpy", "fastsoftmax: ratio to memcpy",
                            "gain", "largest gain"], "llrrrrl", rows)
        body += (f"\n\n`{lesson}` trails the library by more than 3% at {trailing} of the "
                 f"{total} points both ran. Ratios: median (range) over those points. Gain: "
                 f"`{lesson}`'s median time over the library's, timed in the same run.")
    return "\n".join([body, "", pr.method_line(res, "", pr.sweeps_desc(res)), "",
                      pr.source_line(res, md_path, root)])
