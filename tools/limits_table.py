#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The chapters' limits tables from tools/profile_limits.sh's CSV (Nsight Compute, one launch).

Rewrites every block between

  <!-- BEGIN limits-table step05_vectorized -->
  <!-- END limits-table -->

in README.md and docs/*.md with one line per profiled shape: the kernel's duration, DRAM and SM
throughput, warp instructions executed, issue slots busy, achieved occupancy, and the three warp
stall reasons that cost the most cycles per issued instruction. Numbers come from the CSV alone.

  python3 tools/limits_table.py [CSV] [--check]

CSV defaults to docs/results/ncu_limits_h200.csv. --check writes nothing and exits 1 when a table
would change.
"""
from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (the marker code)

DEFAULT_CSV = pr.REPO_ROOT / "docs" / "results" / "ncu_limits_h200.csv"
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
TOP_STALLS = 3


class Profile:
    """metrics[step][shape][metric] = value (summed over the kernels of the launch for counts,
    the first kernel's for the rest: every step launches one kernel)."""

    def __init__(self, path: Path):
        self.path = path
        self.header: List[str] = []
        self.metrics: Dict[str, Dict[str, Dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
        self.shapes: List[str] = []
        try:
            text = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise pr.ToolError(f"{path}: no such file (run tools/profile_limits.sh)")
        self.header = [l[1:].strip() for l in text if l.startswith("#")]
        rows = list(csv.DictReader(l for l in text if not l.startswith("#")))
        if not rows or "shape" not in rows[0]:
            raise pr.ToolError(f"{path}: no 'step,shape,kernel,metric,unit,value' rows; "
                               "re-run tools/profile_limits.sh")
        for r in rows:
            try:
                value = float(r["value"])
            except ValueError:
                continue  # ncu prints "n/a" for a metric a kernel does not have
            m = self.metrics[r["step"]][r["shape"]]
            m[r["metric"]] = m.get(r["metric"], 0.0) + value if r["metric"] == "smsp__inst_executed.sum" \
                else m.get(r["metric"], value)
            if r["shape"] not in self.shapes:
                self.shapes.append(r["shape"])


def fmt(x: Optional[float], digits: int = 0) -> str:
    return pr.NOT_MEASURED if x is None else f"{x:.{digits}f}"


def stalls(m: Dict[str, float]) -> str:
    found: List[Tuple[float, str]] = []
    for name, value in m.items():
        if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX):
            found.append((value, name[len(STALL_PREFIX):-len(STALL_SUFFIX)]))
    found.sort(reverse=True)
    return ", ".join(f"{reason.replace('_', ' ')} {value:.1f}" for value, reason in found[:TOP_STALLS]) \
        or pr.NOT_MEASURED


def render(profile: Profile, args: str, md_path: Path, root: Path) -> str:
    step = args.strip()
    if not step or " " in step:
        raise pr.MarkerError("limits-table: name exactly one step, e.g. "
                             "<!-- BEGIN limits-table step05_vectorized -->")
    if step not in profile.metrics:
        raise pr.MarkerError(f"limits-table: {profile.path.name} has no step '{step}' "
                             f"(it has {', '.join(sorted(profile.metrics))})")
    rows = []
    for shape in profile.shapes:
        m = profile.metrics[step].get(shape)
        if not m:
            continue
        get = m.get
        inst = get("smsp__inst_executed.sum")
        dur = get("gpu__time_duration.sum")
        rows.append([
            shape.replace("x", "×"),
            fmt(dur / 1000 if dur is not None else None, 1),
            fmt(get("dram__throughput.avg.pct_of_peak_sustained_elapsed")),
            fmt(get("sm__throughput.avg.pct_of_peak_sustained_elapsed")),
            fmt(inst / 1e6 if inst is not None else None, 2),
            fmt(get("sm__inst_issued.avg.pct_of_peak_sustained_active")),
            fmt(get("sm__warps_active.avg.pct_of_peak_sustained_active")),
            f"{fmt(get('launch__registers_per_thread'))} / {fmt(get('launch__block_size'))} / "
            f"{fmt(get('launch__grid_size'))}",
            stalls(m),
        ])
    table = pr.md_table(["shape", "µs", "DRAM %", "SM %", "warp instructions (M)",
                         "issue slots busy %", "achieved occupancy %",
                         "registers / block / grid", "top stalls (cycles per issued instruction)"],
                        "lrrrrrrll", rows)
    # The header's command line without its metric list (the paragraph above names the metrics).
    source = "; ".join(h.split("  (ncu")[0] for h in profile.header)
    return "\n".join([
        table, "",
        "One verified launch of `build/softmax_profile STEP ROWS COLS` under `ncu --clock-control none` "
        "(its default cache control flushes L2 first): duration "
        "(`gpu__time_duration`), DRAM and SM throughput in % of peak, `smsp__inst_executed.sum`, "
        "issue slots busy (`sm__inst_issued`, % of peak while active), achieved occupancy "
        "(`sm__warps_active`), and the warp stall reasons with the most cycles per issued "
        "instruction (`smsp__average_warps_issue_stalled_*_per_issue_active`).", "",
        f"{source}; data: {pr.link_from(md_path, profile.path, root)}."])


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV,
                    help=f"profile_limits.sh's CSV (default: {DEFAULT_CSV.relative_to(pr.REPO_ROOT)})")
    ap.add_argument("--docs-root", type=Path, default=pr.REPO_ROOT, metavar="DIR")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a table would change")
    args = ap.parse_args(argv)
    try:
        profile = Profile(args.csv)
        root = args.docs_root
        renderers = {"limits-table": lambda a, md: render(profile, a, md, root)}
        return pr.rewrite_tables(root, renderers, args.check, "limits tables", "limits_table.py")
    except pr.ToolError as e:
        print(f"limits_table.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
