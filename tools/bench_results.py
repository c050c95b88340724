# SPDX-License-Identifier: MIT
"""Loading softmax_bench's JSON (and torch_softmax_bench.py's, the same schema): the Results of
one run, its sweeps and points, how a point is named, and the constants the tables and charts
share; plus the provenance helpers the other tools use (git_commit, gpu_slug).

Part of tools/plot_results.py, which re-exports every name here (import plot_results as pr).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

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
# Naming points
# ------------------------------------------------------------------------------------------------

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
