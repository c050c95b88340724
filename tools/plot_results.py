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
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = REPO_ROOT / "docs" / "results" / "bench_h200.json"

TABLE_N = 4096                                         # the results table's row length
SWEEP_NS = (256, 512, 1024, 2048, 4096, 8192, 16384)   # rows of a sweep table
STAIRCASE_NS = (1024, 4096, 16384)                     # bar groups of the staircase chart

# The benchmark's sweeps (softmax_bench's names: <impl>/<sweep>/M:<M>/N:<N>).
GRID, IRREGULAR, SHORT, LONG, FEW = "grid", "irregular", "short", "long", "few"
SWEEPS = (GRID, IRREGULAR, SHORT, LONG, FEW)
SWEEP_TITLES = {GRID: "grid", IRREGULAR: "irregular", SHORT: "short rows", LONG: "long rows",
                FEW: "few rows"}
# The columns of the sweep-summary table: (sweep, heading, which (M, N) belong).
SUMMARY_BINS = (
    (GRID, "grid, N < 1024", lambda s: s[1] < 1024),
    (GRID, "grid, N ≥ 1024", lambda s: s[1] >= 1024),
    (IRREGULAR, "irregular, N < 1024", lambda s: s[1] < 1024),
    (IRREGULAR, "irregular, N ≥ 1024", lambda s: s[1] >= 1024),
    (SHORT, "short rows", lambda s: True),
    (LONG, "long rows", lambda s: True),
    (FEW, "few rows", lambda s: True),
)
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

# The steps, and the library (fastsoftmax/) as the table's last line: what the steps add up to.
STEP_RE = re.compile(r"^(step\d\d_\w+|fastsoftmax)$")
NO_VALUE = "—"        # a cell that has no meaning for the row (speed-up of a baseline)
NOT_MEASURED = "n/a"  # a cell the benchmark could not fill (the step skipped that N)

# Reference rows above the steps, in this order; other non-step implementations follow them.
REFERENCE_ORDER = ("memcpy", "cudnn", "unfused")
DEFAULT_LESSONS = {
    "memcpy": "device-to-device cudaMemcpyAsync of the same bytes: the practical ceiling",
}

# Paths that hold generated output: a change there does not make a commit "dirty" (see
# git_commit, which tools/reproduce.sh and the other tools use).
GENERATED_PATHSPECS = (":(exclude)docs/results", ":(exclude)docs/img", ":(exclude)*.md")


class ToolError(Exception):
    """A problem the user must fix (bad input, missing file); printed without a traceback."""


class MarkerError(ToolError):
    """A marker that cannot be rendered (unknown step, bad argument, no END)."""


class MissingStep(MarkerError):
    """A marker names a step the JSON does not have (with --only: its block is left as it is)."""


# ------------------------------------------------------------------------------------------------
# Loading the benchmark JSON
# ------------------------------------------------------------------------------------------------

@dataclass
class Point:
    """One benchmark entry: one implementation at one N."""
    gbps: float
    memcpy_gbps: float
    ratio: float
    median_us: float
    min_us: float
    model_bytes: float
    final_step_speedup: float = float("nan")  # baselines: their time over the final step's


Shape = Tuple[int, int]   # (M, N)


@dataclass
class Results:
    path: Path
    context: Dict[str, object]
    order: List[str]                                     # implementations, memcpy first
    # The grid sweep by N, what the results table, sweep tables, staircase and bandwidth use:
    points: Dict[str, Dict[int, Point]] = field(default_factory=dict)
    errors: Dict[str, Dict[int, str]] = field(default_factory=dict)  # skipped entries' messages
    rows: Optional[int] = None                           # M of the grid
    # Every sweep: sweep -> implementation -> (M, N) -> point (or a skipped entry's message).
    sweeps: Dict[str, Dict[str, Dict[Shape, Point]]] = field(default_factory=dict)
    sweep_errors: Dict[str, Dict[str, Dict[Shape, str]]] = field(default_factory=dict)

    @property
    def steps(self) -> List[str]:
        return [name for name in self.order if STEP_RE.match(name)]

    @property
    def references(self) -> List[str]:
        """memcpy and the baselines, in table order (memcpy, cudnn, unfused, then any other)."""
        others = [n for n in self.order if not STEP_RE.match(n)]
        first = [n for n in REFERENCE_ORDER if n in others]
        return first + [n for n in others if n not in first]

    def point(self, name: str, n: int) -> Optional[Point]:
        return self.points.get(name, {}).get(n)

    def error(self, name: str, n: int) -> Optional[str]:
        return self.errors.get(name, {}).get(n)

    def ns(self, name: str) -> List[int]:
        return sorted(set(self.points.get(name, {})) | set(self.errors.get(name, {})))

    def sweep_points(self, sweep: str, name: str) -> Dict[Shape, Point]:
        return self.sweeps.get(sweep, {}).get(name, {})

    def sweep_errors_of(self, sweep: str, name: str) -> Dict[Shape, str]:
        return self.sweep_errors.get(sweep, {}).get(name, {})

    def has_sweep(self, sweep: str) -> bool:
        return any(self.sweeps.get(sweep, {}).values())

    def ctx(self, key: str, default: str = "unknown") -> str:
        value = self.context.get(key)
        return default if value in (None, "") else str(value)

    def lesson(self, name: str) -> str:
        return self.ctx("lesson:" + name, DEFAULT_LESSONS.get(name, ""))


# `<impl>/<sweep>/M:<M>/N:<N>[/...]`; older files wrote `<impl>/N:<N>` (the grid).
_NAME_RE = re.compile(r"^(?P<impl>[^/]+)(?:/(?P<sweep>[A-Za-z_]\w*))?(?:/M:(?P<m>\d+))?/N:(?P<n>\d+)(?:/|$)")


def parse_name(name: str) -> Tuple[str, str, Optional[int], Optional[int]]:
    """(implementation, sweep, M, N) of a benchmark name; sweep 'grid' when the name has none,
    M and N None when the name does not give them."""
    m = _NAME_RE.match(name)
    if not m:
        return name.split("/", 1)[0], GRID, None, None
    return (m.group("impl"), m.group("sweep") or GRID,
            int(m.group("m")) if m.group("m") else None, int(m.group("n")))


def load_results(path: Path) -> Results:
    """Reads a Google Benchmark JSON written by softmax_bench (or torch_softmax_bench.py)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ToolError(f"{path}: no such file (run tools/reproduce.sh, or pass the JSON's path)")
    except json.JSONDecodeError as e:
        raise ToolError(f"{path}: not valid JSON ({e})")
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ToolError(f"{path}: no 'benchmarks' list; is this a Google Benchmark JSON?")
    context = doc.get("context") or {}
    rows = int(context["rows"]) if str(context.get("rows", "")).isdigit() else None

    res = Results(path=path, context=context, order=[], rows=rows)
    seen: List[str] = []
    for entry in doc["benchmarks"]:
        if entry.get("run_type") == "aggregate":   # --benchmark_repetitions statistics: not used
            continue
        name = str(entry.get("name", ""))
        impl, sweep, m_name, n_name = parse_name(name)
        impl = impl or str(entry.get("label", ""))
        n = int(entry["N"]) if "N" in entry else n_name
        m = int(entry["M"]) if "M" in entry else m_name if m_name is not None else res.rows
        if not impl or n is None:
            raise ToolError(f"{path}: entry '{name}' names no implementation or no N")
        if m is None:
            raise ToolError(f"{path}: entry '{name}' gives no M (counter, name or context 'rows')")
        if impl not in seen:
            seen.append(impl)
        if sweep == GRID and res.rows is None:
            res.rows = m
        on_grid = sweep == GRID and m == res.rows
        if sweep == GRID and not on_grid:
            print(f"warning: {path}: grid entry '{name}' has M={m}, not {res.rows}; ignored",
                  file=sys.stderr)
            continue
        if entry.get("error_occurred") or entry.get("skipped"):
            msg = str(entry.get("error_message") or entry.get("skip_message") or "skipped")
            res.sweep_errors.setdefault(sweep, {}).setdefault(impl, {})[(m, n)] = msg
            if on_grid:
                res.errors.setdefault(impl, {})[n] = msg
            continue
        if "GBps" not in entry:
            raise ToolError(f"{path}: entry '{name}' has no GBps counter")
        p = Point(
            gbps=float(entry["GBps"]),
            memcpy_gbps=float(entry.get("memcpy_GBps", float("nan"))),
            ratio=float(entry.get("ratio_to_memcpy", float("nan"))),
            median_us=float(entry.get("median_us", entry.get("real_time", float("nan")))),
            min_us=float(entry.get("min_us", float("nan"))),
            model_bytes=float(entry.get("model_bytes", float("nan"))),
            final_step_speedup=float(entry.get("final_step_speedup", float("nan"))))
        res.sweeps.setdefault(sweep, {}).setdefault(impl, {})[(m, n)] = p
        if on_grid:
            res.points.setdefault(impl, {})[n] = p

    # The context's order first (memcpy, steps in table order, baselines), then anything else.
    listed = [s for s in str(context.get("implementations", "")).split(",") if s]
    res.order = listed + [s for s in seen if s not in listed]
    for sweep, by_impl in sorted(res.sweep_errors.items()):
        for impl, errs in sorted(by_impl.items()):
            print(f"note: {path.name}: {impl} skipped in the {sweep} sweep at "
                  f"{', '.join(fmt_shape(res, sweep, s) for s in sorted(errs))}", file=sys.stderr)
    return res


# ------------------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------------------

def fmt_gbps(x: float) -> str:
    return f"{x:.0f}"


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}"


def fmt_speedup(x: float) -> str:
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def fmt_shape(res: Results, sweep: str, shape: Shape, times: str = "×") -> str:
    """'N = 1408' for a point of M = the run's rows outside the short-rows sweep, else '65536×61'."""
    m, n = shape
    return f"N = {n}" if sweep != SHORT and m == res.rows else f"{m}{times}{n}"


def fmt_shapes(res: Results, sweep: str, shapes: Sequence[Shape], most: int = 6) -> str:
    """'N = 1261, 1358 ...' or '65536×61, 65536×127': the first `most` of the points."""
    text = [fmt_shape(res, sweep, s) for s in shapes[:most]]
    if all(t.startswith("N = ") for t in text):
        text = ["N = " + ", ".join(t[4:] for t in text)] if text else []
    return ", ".join(text) + (" ..." if len(shapes) > most else "")


def md_cell(text: str) -> str:
    """A table cell: pipes escaped, no line breaks."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


def md_table(header: Sequence[str], align: str, rows: Sequence[Sequence[str]]) -> str:
    """align: one character per column, 'l' or 'r'."""
    rule = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join(rule[a] for a in align) + " |"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def link_from(md_path: Path, target: Path, root: Path) -> str:
    """A Markdown link to `target` that works from `md_path`, shown by its path in the repo."""
    target = target.resolve()
    try:
        shown = target.relative_to(root.resolve()).as_posix()
    except ValueError:
        shown = target.as_posix()
    href = Path(os.path.relpath(target, md_path.resolve().parent)).as_posix()
    return f"[{shown}]({href})"


def cuda_versions(res_ctx: Callable[[str], str]) -> str:
    driver_cuda, runtime_cuda = res_ctx("driver_cuda"), res_ctx("runtime_cuda")
    if driver_cuda == runtime_cuda:
        return f"CUDA {driver_cuda}"
    return f"CUDA {driver_cuda} (driver) / {runtime_cuda} (runtime)"


def source_line(res: Results, md_path: Path, root: Path) -> str:
    """The provenance sentence under every generated table."""
    command = res.ctx("command", "")
    command = f"`{command}`" if command else f"`{res.ctx('executable')}` (command not recorded)"
    return (f"Measured on {res.ctx('gpu_name')}, driver {res.ctx('driver')}, "
            f"{cuda_versions(res.ctx)}, commit `{res.ctx('commit', 'not recorded')}`, "
            f"{res.ctx('date')[:10]}; command: {command}; data: {link_from(md_path, res.path, root)}.")


def method_line(res: Results, n_desc: str, shapes: Optional[str] = None) -> str:
    """How the numbers were measured; `shapes` replaces 'M = rows, n_desc' when given."""
    when = ("timed interleaved with it, launch by launch"
            if res.ctx("memcpy_timing", "").startswith("interleaved") else "measured in the same run")
    # A run that times some shapes more often than others says so in timed_runs_rule.
    runs = res.ctx("timed_runs_rule", "") or f"{res.ctx('timed_runs', '?')} launches"
    return (f"{shapes + ';' if shapes else f'M = {res.rows} rows, {n_desc},'} float32. GB/s = 2·M·N·4 bytes / median "
            f"time of {runs}, L2 flushed before each; ratio = against a "
            f"device-to-device memcpy of the same bytes, {when}.")


def sweeps_desc(res: Results) -> str:
    """The sweeps of the run: the JSON's `sweeps` context, or (older files) what the grid holds."""
    if res.ctx("sweeps", ""):
        return "Sweeps: " + res.ctx("sweeps").replace("*", "·")
    ns = sorted({n for pts in res.points.values() for n in pts})
    return f"M = {res.rows} rows, N = {ns[0]}..{ns[-1]} ({len(ns)} row lengths)" if ns else "no points"


def extras_line(extras: Sequence[Results], md_path: Path, root: Path) -> List[str]:
    """Where the --extra implementations come from, and what their ratios are against."""
    if not extras:
        return []
    parts = [f"{', '.join(n for n in ex.order if n != 'memcpy')} from "
             f"{link_from(md_path, ex.path, root)} (commit `{ex.ctx('commit', 'not recorded')}`, "
             f"{ex.ctx('gpu_name')}, {ex.ctx('date')[:10]})" for ex in extras]
    return ["", "Compared with " + "; ".join(parts) + ": each ratio there is against the memcpy "
            "timed beside it in its own program."]


def skipped_note(notes: Dict[str, str]) -> List[str]:
    if not notes:
        return []
    return ["", f"{NOT_MEASURED}: not measured; the benchmark skipped it: " +
            "; ".join(f"{where}: {msg}" for where, msg in notes.items()) + "."]


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------

def parse_marker_args(args: str, allowed: Sequence[str], kind: str) -> Tuple[Dict[str, str], List[str]]:
    """Splits 'key=value word ...' into options (only `allowed` keys) and bare words."""
    opts: Dict[str, str] = {}
    words: List[str] = []
    for token in args.split():
        if "=" in token:
            key, value = token.split("=", 1)
            if key not in allowed:
                raise MarkerError(f"{kind}: unknown argument '{token}' (allowed: "
                                  f"{', '.join(k + '=...' for k in allowed) or 'none'})")
            opts[key] = value
        else:
            words.append(token)
    return opts, words


def unknown_step(kind: str, name: str, res: Results, known: Sequence[str]) -> MarkerError:
    return MissingStep(f"{kind}: no step named '{name}' in {res.path} "
                       f"(it has: {', '.join(known) or 'none'})")


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


# ------------------------------------------------------------------------------------------------
# Markers (shared with tools/dram_traffic.py)
# ------------------------------------------------------------------------------------------------

BEGIN_RE = re.compile(r"<!--\s*BEGIN\s+(?P<kind>[A-Za-z0-9_-]+)(?P<args>(?:\s+[^>]*?)?)\s*-->")
END_RE = re.compile(r"<!--\s*END\s+(?P<kind>[A-Za-z0-9_-]+)\s*-->")
FENCE_RE = re.compile(r"^(`{3,}|~{3,})")

# kind -> render(args, markdown file) -> the block's Markdown
Renderer = Callable[[str, Path], Optional[str]]  # None: leave the block as it is


def rewrite_markers(text: str, renderers: Dict[str, Renderer], md_path: Path) -> Tuple[str, Dict[str, int]]:
    """Replaces what lies between each BEGIN/END pair of a kind in `renderers` (a renderer that
    returns None leaves its block as it is: it belongs to another data file).

    A marker counts only alone on its line and outside fenced code blocks, so prose and examples
    can show the syntax. The block becomes: the BEGIN line, a blank line, the rendered Markdown, a
    blank line, the END line; rendering twice gives the same text. Returns the new text and the
    number of blocks of each kind.
    """
    lines = text.split("\n")
    out: List[str] = []
    blocks: Dict[str, int] = {}
    fence: Optional[str] = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fm = FENCE_RE.match(stripped)
        if fence is not None:                    # inside ``` ... ```: copied as is
            if fm and stripped == fm.group(1) and stripped[0] == fence[0] and len(stripped) >= len(fence):
                fence = None
            out.append(line)
            i += 1
            continue
        if fm:
            fence = fm.group(1)
            out.append(line)
            i += 1
            continue
        end = END_RE.fullmatch(stripped)
        if end and end.group("kind") in renderers:
            raise MarkerError(f"{md_path}:{i + 1}: <!-- END {end.group('kind')} --> without a BEGIN")
        begin = BEGIN_RE.fullmatch(stripped)
        if not begin or begin.group("kind") not in renderers:
            out.append(line)
            i += 1
            continue
        kind = begin.group("kind")
        j = i + 1
        while j < len(lines):
            s = lines[j].strip()
            e = END_RE.fullmatch(s)
            if e and e.group("kind") == kind:
                break
            b = BEGIN_RE.fullmatch(s)
            if b and b.group("kind") in renderers:
                raise MarkerError(f"{md_path}:{i + 1}: BEGIN {kind} is not closed before the "
                                  f"BEGIN {b.group('kind')} at line {j + 1}")
            j += 1
        else:
            raise MarkerError(f"{md_path}:{i + 1}: BEGIN {kind} has no <!-- END {kind} -->")
        try:
            body = renderers[kind](begin.group("args").strip(), md_path)
        except MarkerError as e:
            raise MarkerError(f"{md_path}:{i + 1}: {e}") from None
        if body is None:                         # the renderer leaves this block to another run
            out.extend(lines[i:j + 1])
            i = j + 1
            continue
        out.append(line)
        out.extend(["", *body.strip("\n").split("\n"), ""])
        out.append(lines[j])
        blocks[kind] = blocks.get(kind, 0) + 1
        i = j + 1
    if fence is not None:
        print(f"warning: {md_path}: a fenced code block is never closed", file=sys.stderr)
    return "\n".join(out), blocks


def markdown_files(root: Path) -> List[Path]:
    """README.md and docs/*.md under `root`, the files that may hold markers."""
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted((root / "docs").glob("*.md"))


def update_markdown(root: Path, renderers: Dict[str, Renderer], check: bool) -> bool:
    """Renders every marked block in README.md and docs/*.md; writes the changed files, or with
    `check` only reports them. Nothing is written if any block fails. Returns True when some file
    changed (or would change)."""
    planned = []
    for path in markdown_files(root):
        old = path.read_text(encoding="utf-8")
        new, blocks = rewrite_markers(old, renderers, path)   # raises before anything is written
        if blocks:
            planned.append((path, old, new, blocks))
    if not planned:
        kinds = ", ".join(sorted(renderers))
        print(f"no {kinds} markers in {root / 'README.md'} or {root / 'docs'}/*.md: no table written")
        return False
    changed = False
    for path, old, new, blocks in planned:
        what = f"{os.path.relpath(path)} ({', '.join(f'{k} x{c}' for k, c in sorted(blocks.items()))})"
        if new == old:
            print(f"unchanged  {what}")
            continue
        changed = True
        if check:
            print(f"outdated   {what}")
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote    {what}")
    return changed


def rewrite_tables(root: Path, renderers: Dict[str, Renderer], check: bool, what: str,
                   tool: str) -> int:
    """update_markdown for a tool's own markers: exit status 1 when `check` finds `what` out of
    date (the message names `tool`, the script to run), else 0."""
    if update_markdown(root, renderers, check) and check:
        print(f"{what} are out of date: run tools/{tool}", file=sys.stderr)
        return 1
    return 0


# ------------------------------------------------------------------------------------------------
# Provenance helpers (shared with the other tools)
# ------------------------------------------------------------------------------------------------

def git_commit(root: Path = REPO_ROOT) -> str:
    """Short hash of HEAD, with -dirty when anything but generated output differs from it.
    SOFTMAX_COMMIT overrides it, for a copy of the tree made without its .git folder."""
    if os.environ.get("SOFTMAX_COMMIT"):
        return os.environ["SOFTMAX_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", ".",
                                 *GENERATED_PATHSPECS],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if status else "")


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100', 'NVIDIA GeForce RTX 4090' -> 'rtx-4090',
    'NVIDIA A100-SXM4-80GB' -> 'a100': the model, without vendor, memory size or form factor."""
    words = re.split(r"[^a-z0-9]+", name.lower())
    kept: List[str] = []
    for w in words:
        if w in ("", "nvidia", "geforce", "tesla"):
            continue
        if re.fullmatch(r"\d+gb|sxm\d*|pcie|hbm\d*e?|nvl\d*|mig", w):
            break
        kept.append(w)
    return "-".join(kept) or "gpu"


# ------------------------------------------------------------------------------------------------
# Charts
# ------------------------------------------------------------------------------------------------

def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ToolError("matplotlib is not installed (pip install matplotlib), or pass --no-charts")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def chart_subtitle(res: Results) -> str:
    return (f"{res.ctx('gpu_name')} · driver {res.ctx('driver')} · {cuda_versions(res.ctx)} · "
            f"commit {res.ctx('commit', 'not recorded')} · {res.ctx('date')[:10]}")


def save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No 'Software' entry: the PNG then depends on the data and the matplotlib version only.
    fig.savefig(path, dpi=150, bbox_inches="tight", metadata={"Software": None})
    print(f"wrote      {os.path.relpath(path)}")


def _log2_axis(ax, ns: Sequence[int]) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator
    if not ns:
        return
    ax.set_xscale("log", base=2)
    lo, hi = min(ns), max(ns)
    ticks = [2 ** e for e in range(lo.bit_length() - 1, hi.bit_length()) if lo <= 2 ** e <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlim(lo / 1.05, hi * 1.05)


def draw_bandwidth(res: Results, extras: Sequence[Results], path: Path) -> None:
    """Top panel: GB/s against N on the grid. Bottom panel, when a file has the irregular sweep:
    the ratio to memcpy against N there (each file's ratio against its own memcpy)."""
    plt = _pyplot()
    irregular = any(r.has_sweep(IRREGULAR) for r in (res, *extras))
    if irregular:
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 11), gridspec_kw={"height_ratios": (1.2, 1)})
        fig.subplots_adjust(top=0.93, hspace=0.25)
    else:
        fig, ax = plt.subplots(figsize=(11, 6.2))
        ax2 = None

    # (results, implementation, legend label, line style), one per line, in legend order.
    lines: List[Tuple[Results, str, str, Dict[str, object]]] = []
    steps = res.steps
    cmap = plt.get_cmap("viridis")
    markers = "os^vDPX*hp<>"
    # Steps: one colour ramp from dark (step00) to light (the last step), in table order.
    for i, name in enumerate(steps):
        lines.append((res, name, name, dict(color=cmap(0.85 * i / max(1, len(steps) - 1)),
                                            marker=markers[i % len(markers)], markersize=3.5,
                                            linewidth=1.6)))
    # References: memcpy black dashed, baselines grey.
    grey_styles = [("0.45", "-."), ("0.6", ":"), ("0.3", (0, (1, 1))), ("0.7", "--")]
    for k, name in enumerate(res.references):
        if name == "memcpy":
            lines.append((res, name, "memcpy (device to device)",
                          dict(color="black", linestyle="--", linewidth=2.0, zorder=5)))
        else:
            colour, style = grey_styles[(k - 1) % len(grey_styles)]
            lines.append((res, name, f"{name} (baseline)",
                          dict(color=colour, linestyle=style, linewidth=1.8)))
    # Every implementation of the --extra files (torch, triton, ...): their own colours, no memcpy.
    extra_colours = ["tab:red", "tab:orange", "tab:brown", "tab:pink", "tab:purple", "tab:cyan"]
    k = 0
    for ex in extras:
        for name in ex.order:
            if name == "memcpy" or not any(ex.sweep_points(sw, name) for sw in SWEEPS):
                continue
            label = name
            version = ex.ctx("version:" + name, "")
            if version:
                label += f" {version}"
            if ex.ctx("gpu_name") != res.ctx("gpu_name"):
                label += f" (on {ex.ctx('gpu_name')})"
            if ex.rows != res.rows:
                label += f" (M = {ex.rows})"
            lines.append((ex, name, label, dict(color=extra_colours[k % len(extra_colours)],
                                                linestyle=(0, (5, 1.5)), linewidth=1.8)))
            k += 1

    def plot(axis, r: Results, sweep: str, name: str, label: str, style: Dict[str, object],
             value: Callable[[Point], float]) -> List[int]:
        pts = r.sweep_points(sweep, name)
        shapes = sorted(s for s in pts if sweep != GRID or s[0] == r.rows)
        if not shapes:
            return []
        ns = [n for _, n in shapes]
        kw = dict(style)
        if "marker" in kw:
            kw["markevery"] = max(1, len(ns) // 16)
        axis.plot(ns, [value(pts[s]) for s in shapes], label=label, **kw)
        return ns

    all_ns: List[int] = []
    for r, name, label, style in lines:
        all_ns += plot(ax, r, GRID, name, label, style, lambda p: p.gbps)
    top = max((p.gbps for r, name, _, _ in lines for p in r.sweep_points(GRID, name).values()),
              default=1.0)
    try:
        peak = float(res.ctx("gpu_peak_gbps", "0"))
    except ValueError:
        peak = 0.0
    if peak > 0:
        ax.axhline(peak, color="0.6", linewidth=1, linestyle=":")
        ax.annotate(f"DRAM peak from the device's memory clock and bus width: {peak:.0f} GB/s",
                    (0.01, peak), xycoords=("axes fraction", "data"), textcoords="offset points",
                    xytext=(0, -11), fontsize=8, color="0.4")
        top = max(top, peak)
    _log2_axis(ax, all_ns)
    ax.set_ylim(0, top * 1.05)
    ax.set_xlabel(f"N, columns per row (M = {res.rows} rows, float32; log scale)")
    ax.set_ylabel("effective bandwidth, GB/s = 2·M·N·4 B / median time")
    ax.grid(True, alpha=0.3)
    fig.suptitle("Row-wise softmax: effective bandwidth against row length", fontsize=13)
    ax.set_title("grid: N = 128·i · " + chart_subtitle(res), fontsize=9, color="0.3")

    if ax2 is not None:
        irr_ns: List[int] = []
        for r, name, label, style in lines:
            irr_ns += plot(ax2, r, IRREGULAR, name, label, style, lambda p: p.ratio)
        _log2_axis(ax2, irr_ns)
        ratio_top = max((p.ratio for r, name, _, _ in lines
                         for p in r.sweep_points(IRREGULAR, name).values()), default=1.0)
        ax2.set_ylim(0, max(1.05, ratio_top * 1.05))
        ax2.set_xlabel("N = 97·k columns per row, k = 3..168 (float32; log scale); a row starts "
                       "16-byte aligned only when N % 4 == 0")
        ax2.set_ylabel("ratio to memcpy of the same bytes")
        ax2.grid(True, alpha=0.3)
        ax2.set_title(f"irregular: M = {res.rows} rows, N = 97·k; each file's ratio against its "
                      f"own memcpy", fontsize=9, color="0.3")

    # One legend for both panels, every label once.
    seen: Dict[str, object] = {}
    for axis in (ax, ax2):
        if axis is not None:
            for h, l in zip(*axis.get_legend_handles_labels()):
                seen.setdefault(l, h)
    ax.legend(list(seen.values()), list(seen), loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize=8, frameon=False)
    save(fig, path)
    plt.close(fig)


def draw_long_rows(res: Results, extras: Sequence[Results], path: Path) -> bool:
    """When the JSON has the long or few sweeps: the ratio to memcpy against N on the long sweep
    (M*N = 2^27; aligned N solid, N + 3 dotted), and a bar per implementation for each few-rows
    shape. Returns False (nothing drawn) when neither sweep was run."""
    runs = [r for r in (res, *extras) if r.has_sweep(LONG) or r.has_sweep(FEW)]
    if not runs:
        return False
    plt = _pyplot()
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 10), gridspec_kw={"height_ratios": (1, 1)})
    fig.subplots_adjust(top=0.92, hspace=0.35)
    names: List[Tuple[Results, str]] = []
    for r in runs:
        for name in ([n for n in r.order if n != "memcpy"]):
            if r.sweep_points(LONG, name) or r.sweep_points(FEW, name):
                names.append((r, name))
    cmap = plt.get_cmap("viridis")
    steps = res.steps
    def colour(r: Results, name: str, k: int):
        if r is res and name in steps:
            return cmap(0.85 * steps.index(name) / max(1, len(steps) - 1))
        return ["0.45", "0.65", "tab:red", "tab:orange", "tab:brown", "tab:pink"][k % 6]
    k_other = 0
    ns_all: List[int] = []
    for r, name in names:
        pts = r.sweep_points(LONG, name)
        if not pts:
            continue
        c = colour(r, name, k_other)
        if not (r is res and name in steps):
            k_other += 1
        aligned = sorted(s for s in pts if s[1] % 4 == 0)
        odd = sorted(s for s in pts if s[1] % 4 != 0)
        if aligned:
            ax.plot([n for _, n in aligned], [pts[s].ratio for s in aligned], color=c, marker="o",
                    markersize=3.5, linewidth=1.6, label=name)
            ns_all += [n for _, n in aligned]
        if odd:
            ax.plot([n - 3 for _, n in odd], [pts[s].ratio for s in odd], color=c, marker="x",
                    markersize=4, linewidth=1.0, linestyle=":")
    if ns_all:
        _log2_axis(ax, ns_all)
    ax.axhline(0.95, color="tab:green", linewidth=1, linestyle=":")
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("N, columns per row (M = 2^27 / N rows, float32; log scale); dotted: N + 3")
    ax.set_ylabel("ratio to memcpy of the same bytes")
    ax.grid(True, alpha=0.3)
    ax.set_title("long rows: M·N = 2^27 · " + chart_subtitle(res), fontsize=9, color="0.3")
    shapes = sorted({s for r, name in names for s in r.sweep_points(FEW, name)},
                    key=lambda s: (-s[1], s[0]))
    if shapes:
        width = 0.8 / max(1, len(names))
        k_other = 0
        for i, (r, name) in enumerate(names):
            pts = r.sweep_points(FEW, name)
            c = colour(r, name, k_other)
            if not (r is res and name in steps):
                k_other += 1
            xs = [j + i * width for j, s in enumerate(shapes) if s in pts]
            ax2.bar(xs, [pts[s].ratio for s in shapes if s in pts], width=width, color=c,
                    label=name)
        ax2.set_xticks([j + 0.4 - width / 2 for j in range(len(shapes))])
        ax2.set_xticklabels([f"{m}x{n}" for m, n in shapes])
    ax2.set_ylim(0, 1.1)
    ax2.set_ylabel("ratio to memcpy of the same bytes")
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.set_title("few rows", fontsize=9, color="0.3")
    handles: Dict[str, object] = {}
    for axis in (ax, ax2):
        for h, l in zip(*axis.get_legend_handles_labels()):
            handles.setdefault(l, h)
    ax.legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize=8, frameon=False)
    fig.suptitle("Row-wise softmax: long rows and few rows", fontsize=13)
    save(fig, path)
    plt.close(fig)
    return True


def draw_staircase(res: Results, path: Path) -> bool:
    steps = res.steps
    groups = ["memcpy"] + steps
    ns = [n for n in STAIRCASE_NS if all(res.point(g, n) for g in groups)]
    dropped = [n for n in STAIRCASE_NS if n not in ns]
    if dropped and ns:
        print(f"note: {path.name}: N = {', '.join(map(str, dropped))} left out (not measured for "
              f"memcpy and every step)", file=sys.stderr)
    if not steps or not ns:
        print(f"warning: no N in {list(STAIRCASE_NS)} measured for memcpy and every step: "
              f"{path.name} not drawn", file=sys.stderr)
        return False
    plt = _pyplot()
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(11, 5.8))
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
    width = 0.8 / len(ns)
    top = 0.0
    handles = []
    for k, n in enumerate(ns):
        colour = colours[k % len(colours)]
        xs = [g + (k - (len(ns) - 1) / 2) * width for g in range(len(groups))]
        pts = [res.point(g, n) for g in groups]
        # memcpy, the reference, hatched; then the steps.
        for sel, style in ((slice(0, 1), dict(hatch="//", edgecolor="white")), (slice(1, None), {})):
            bars = ax.bar(xs[sel], [p.gbps for p in pts[sel]], width * 0.95, color=colour, **style)
            ax.bar_label(bars, labels=[fmt_ratio(p.ratio) for p in pts[sel]], rotation=90,
                         padding=2, fontsize=7)
        handles.append(Patch(color=colour, label=f"N = {n}"))
        top = max(top, max(p.gbps for p in pts))
    handles.append(Patch(facecolor="0.6", edgecolor="white", hatch="//",
                         label="memcpy of the same bytes"))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=25, ha="right")
    ax.set_ylim(0, top * 1.18)
    ax.set_ylabel("effective bandwidth, GB/s")
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"One optimisation per step (M = {res.rows} rows; bar labels: ratio to memcpy "
                 f"at the same N)", fontsize=12)
    ax.set_title(chart_subtitle(res), fontsize=9, color="0.3")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
              frameon=False)
    save(fig, path)
    plt.close(fig)
    return True


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
