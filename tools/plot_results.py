#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Charts and results tables from one benchmark JSON (build/bench/softmax_bench's output).

Numbers are generated, never typed: this script draws the charts and rewrites every results table
in README.md and docs/*.md between marker comments, from the JSON alone.

Entries are named <impl>/<sweep>/M:<M>/N:<N> (Google Benchmark may append /iterations:1/...), the
sweep one of grid (M = 4096, N = 128*i), irregular (M = 4096, N = 97*k) and short (many short
rows); an entry named <impl>/N:<N>, as older files have, belongs to the grid. The results table,
the sweep tables, the staircase and the top of the bandwidth chart use the grid.

  docs/img/bandwidth.png   top: effective GB/s against N on the grid for every step, with memcpy
                           (black, dashed), the baselines (grey) and every implementation of the
                           --extra files (torch, triton); bottom, when the irregular sweep was run:
                           the ratio to memcpy against N there, the same lines. A second panel
                           rather than a second chart, so the one image the README shows has both
                           and the two x axes line up; ratio, not GB/s, because N = 97*k puts
                           rows of unaligned and aligned lengths side by side and the ratio
                           removes memcpy's own ups and downs between neighbouring N.
  docs/img/staircase.png   each step's GB/s at N in STAIRCASE_NS, bars labelled with the ratio
                           to memcpy at that N
  docs/img/long_rows.png   when the long or few sweeps were run: the ratio to memcpy against N on
                           the long sweep, and bars for the few-rows shapes

Markers (each alone on its line, outside fenced code; text outside them is never touched):

  <!-- BEGIN results-table -->                 the whole table at N = --table-n (4096)
  <!-- BEGIN results-table upto=step03_block -->  the baselines and the steps up to step03_block
  <!-- END results-table -->
  <!-- BEGIN sweep-table step03_block -->      one step over N in SWEEP_NS
  <!-- END sweep-table -->
  <!-- BEGIN sweep-summary -->                 one line per step, baseline and --extra
  <!-- END sweep-summary -->                   implementation: its lowest / median ratio to
                                               memcpy over grid N < 1024, grid N >= 1024,
                                               irregular N < 1024, irregular N >= 1024, short rows
  <!-- BEGIN target-check step07_persistent --> the step's floors (check_targets), one line per
  <!-- END target-check -->                    floor and sweep, with the points that miss
  <!-- BEGIN path-gain -->, <!-- BEGIN library-gap STEP -->: the library's tables
                                               (tools/library_tables.py)
  <!-- BEGIN gpu-table -->                     every GPU with a docs/results/bench_<gpu>.json:
  <!-- END gpu-table -->                       each step's ratio to memcpy at N in STAIRCASE_NS

A marker naming a step the JSON does not have is an error; no file is written then.

  python3 tools/plot_results.py [JSON] [--extra FILE ...] [--table-n N] [--docs-root DIR]
                                [--img-dir DIR] [--no-charts] [--no-tables] [--check]
                                [--only KINDS] [--second-gpu]

--second-gpu: the JSON is from another GPU than the one the chapters quote: its charts go beside
the main ones as docs/img/bandwidth_<gpu>.png and staircase_<gpu>.png, and of the tables only the
gpu-table blocks are rewritten.

JSON defaults to docs/results/bench_h200.json. --check writes nothing and exits 1 when a Markdown
file would change (the charts are not checked). tools/dram_traffic.py imports the marker code,
tools/bench_summary.py the loader and check_targets.

The code, by job (each module's names are re-exported here, so `import plot_results as pr` and
pr.X keep working for the other tools): bench_results.py loads the JSON (Point, Results,
load_results, the constants, git_commit, gpu_slug); md_tables.py formats cells and rewrites the
marked blocks (md_table, source_line, method_line, rewrite_markers, update_markdown);
table_renderers.py renders this script's marker kinds (FLOORS, check_targets); charts.py draws
the charts; library_tables.py renders path-gain and library-gap.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

from bench_results import (REPO_ROOT, DEFAULT_JSON, TABLE_N, SWEEP_NS, STAIRCASE_NS, GRID,
                           IRREGULAR, SHORT, LONG, FEW, SWEEPS, SWEEP_TITLES, SUMMARY_BINS,
                           STEP_RE, NO_VALUE, NOT_MEASURED, REFERENCE_ORDER, DEFAULT_LESSONS,
                           GENERATED_PATHSPECS, ToolError, MarkerError, MissingStep, Point, Shape,
                           Results, _NAME_RE, parse_name, load_results, fmt_shape, fmt_shapes,
                           git_commit, gpu_slug)
from md_tables import (fmt_gbps, fmt_ratio, fmt_speedup, md_cell, md_table, link_from,
                       cuda_versions, source_line, method_line, sweeps_desc, extras_line,
                       skipped_note, parse_marker_args, unknown_step, BEGIN_RE, END_RE, FENCE_RE,
                       Renderer, rewrite_markers, markdown_files, update_markdown, rewrite_tables)
from table_renderers import (FLOORS, CUDNN_FLOOR, render_results_table, bench_jsons,
                             render_gpu_table, render_sweep_table, TargetCheck, check_targets,
                             render_target_check, render_sweep_summary)
from charts import (_pyplot, chart_subtitle, save, _log2_axis, draw_bandwidth, draw_long_rows,
                    draw_staircase)

# Every name of this module before its split, for the other tools' pr.X.
__all__ = [
    "REPO_ROOT", "DEFAULT_JSON", "TABLE_N", "SWEEP_NS", "STAIRCASE_NS", "GRID", "IRREGULAR",
    "SHORT", "LONG", "FEW", "SWEEPS", "SWEEP_TITLES", "SUMMARY_BINS", "STEP_RE", "NO_VALUE",
    "NOT_MEASURED", "REFERENCE_ORDER", "DEFAULT_LESSONS", "GENERATED_PATHSPECS", "ToolError",
    "MarkerError", "MissingStep", "Point", "Shape", "Results", "_NAME_RE", "parse_name",
    "load_results", "fmt_shape", "fmt_shapes", "git_commit", "gpu_slug", "fmt_gbps", "fmt_ratio",
    "fmt_speedup", "md_cell", "md_table", "link_from", "cuda_versions", "source_line",
    "method_line", "sweeps_desc", "extras_line", "skipped_note", "parse_marker_args",
    "unknown_step", "BEGIN_RE", "END_RE", "FENCE_RE", "Renderer", "rewrite_markers",
    "markdown_files", "update_markdown", "rewrite_tables", "FLOORS", "CUDNN_FLOOR",
    "render_results_table", "bench_jsons", "render_gpu_table", "render_sweep_table", "TargetCheck",
    "check_targets", "render_target_check", "render_sweep_summary", "_pyplot", "chart_subtitle",
    "save", "_log2_axis", "draw_bandwidth", "draw_long_rows", "draw_staircase", "leave_if_missing",
    "main",
]


# ------------------------------------------------------------------------------------------------

def leave_if_missing(render: Renderer) -> Renderer:
    """A renderer that leaves its block as it is (None) where the marker names a missing step."""
    def wrapped(args: str, md_path: Path) -> Optional[str]:
        try:
            return render(args, md_path)
        except MissingStep:
            return None
    return wrapped


def main(argv: Optional[Sequence[str]] = None) -> int:
    sys.modules.setdefault("plot_results", sys.modules[__name__])  # one copy of the helpers
    import library_tables  # noqa: E402  (its renderers use this module's helpers)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="?", type=Path, default=DEFAULT_JSON,
                    help=f"benchmark JSON (default: {DEFAULT_JSON.relative_to(REPO_ROOT)})")
    ap.add_argument("--extra", type=Path, action="append", default=[], metavar="FILE",
                    help="a JSON of the same schema (tools/torch_softmax_bench.py: torch, "
                         "triton) to overlay on the bandwidth chart and compare in the "
                         "sweep-summary and target-check blocks (repeatable)")
    ap.add_argument("--table-n", type=int, default=TABLE_N, metavar="N",
                    help=f"row length of the results table (default {TABLE_N})")
    ap.add_argument("--docs-root", type=Path, default=REPO_ROOT, metavar="DIR",
                    help="directory holding README.md and docs/ (default: the repository)")
    ap.add_argument("--img-dir", type=Path, default=None, metavar="DIR",
                    help="where the charts go (default: DOCS_ROOT/docs/img)")
    ap.add_argument("--no-charts", action="store_true", help="tables only")
    ap.add_argument("--no-tables", action="store_true", help="charts only")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a Markdown table would change")
    ap.add_argument("--only", metavar="KINDS",
                    help="rewrite only these marker kinds (comma-separated), and leave the blocks "
                         "that name a step the JSON lacks as they are: for a benchmark run "
                         "filtered to a few implementations")
    ap.add_argument("--second-gpu", action="store_true",
                    help="charts as docs/img/*_<gpu>.png, and only the gpu-table blocks rewritten")
    args = ap.parse_args(argv)

    try:
        res = load_results(args.json)
        if not res.steps:
            raise ToolError(f"{args.json}: no step (stepNN_name) in the benchmark entries")
        root = args.docs_root
        extras = [load_results(p) for p in args.extra]
        if not args.no_tables or args.check:
            renderers: Dict[str, Renderer] = {
                "gpu-table": lambda a, md: render_gpu_table(a, md, root),
            }
            if not args.second_gpu:
                renderers.update({
                    "results-table": lambda a, md: render_results_table(res, a, md, root,
                                                                        args.table_n),
                    "sweep-table": lambda a, md: render_sweep_table(res, a, md, root),
                    "sweep-summary": lambda a, md: render_sweep_summary(res, extras, a, md, root),
                    "target-check": lambda a, md: render_target_check(res, extras, a, md, root),
                    "path-gain": lambda a, md: library_tables.render_path_gain(res, a, md, root),
                    "library-gap": lambda a, md: library_tables.render_library_gap(res, a, md,
                                                                                   root),
                })
            if args.only:
                kinds = [k for k in args.only.split(",") if k]
                unknown = [k for k in kinds if k not in renderers]
                if unknown:
                    raise ToolError(f"--only: unknown marker kind(s) {', '.join(unknown)}")
                renderers = {k: leave_if_missing(renderers[k]) for k in kinds}
            if update_markdown(root, renderers, args.check) and args.check:
                print("tables are out of date: run tools/plot_results.py", file=sys.stderr)
                return 1
        if not args.no_charts and not args.check:
            img = args.img_dir or root / "docs" / "img"
            suffix = f"_{gpu_slug(res.ctx('gpu_name'))}" if args.second_gpu else ""
            draw_bandwidth(res, extras, img / f"bandwidth{suffix}.png")
            draw_staircase(res, img / f"staircase{suffix}.png")
            draw_long_rows(res, extras, img / f"long_rows{suffix}.png")
    except ToolError as e:
        print(f"plot_results.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
