#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shape scan's tables, from build/softmax_shape_scan's JSON (tools/shape_scan.cpp).

Rewrites the blocks between these markers in README.md and docs/*.md (the marker rules of
tools/plot_results.py), from the JSON alone:

  <!-- BEGIN scan-summary -->   the library's lowest and median ratio to memcpy over the scan,
  <!-- END scan-summary -->     by size of matrix; how often it was at least as fast as the final
                                lesson (step08_cluster) and faster than cuDNN, timed in the same
                                rounds, and the closest cases
  <!-- BEGIN scan-table -->     every shape, smallest matrix first: the library's path, memcpy's
  <!-- END scan-table -->       time, the ratio to memcpy of step08, the library and cuDNN, and
                                cuDNN's time over the library's

  python3 tools/scan_table.py [JSON] [--docs-root DIR] [--check]

JSON defaults to docs/results/shape_scan_h200.json. --check writes nothing and exits 1 when a
Markdown file would change.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (the marker code and the provenance helpers)

DEFAULT_JSON = pr.REPO_ROOT / "docs" / "results" / "shape_scan_h200.json"
# Matrices below this many bytes (input alone) sit near the launch-and-latency floor, where a
# ratio to memcpy says little (cudaMemcpy's own overhead dominates there); listed apart.
SMALL_BYTES = 16 << 20


class Scan:
    def __init__(self, path: Path):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise pr.ToolError(f"{path}: cannot read the scan JSON ({e})") from e
        for key in ("device", "shapes", "command", "commit", "date", "seed"):
            if key not in doc:
                raise pr.ToolError(f"{path}: no '{key}' (not a softmax_shape_scan JSON)")
        self.path = path
        self.doc = doc
        self.shapes = sorted(doc["shapes"], key=lambda s: (s["rows"] * s["cols"], s["cols"]))
        if not self.shapes:
            raise pr.ToolError(f"{path}: no shapes")

    def source_line(self, md_path: Path, root: Path) -> str:
        d = self.doc["device"]
        return (f"Measured on {d['name']}, driver {d['driver']}, CUDA {d['runtime_cuda']}, "
                f"commit `{self.doc['commit']}`, {self.doc['date']}; command: "
                f"`{self.doc['command']}`; data: {pr.link_from(md_path, self.path, root)}.")


def ratio(s: Dict, key: str) -> float:
    return s["memcpy_us"] / s[key]


def shape_text(s: Dict) -> str:
    return f"{s['rows']}×{s['cols']}"


def render_summary(scan: Scan, md_path: Path, root: Path) -> str:
    groups = [("below 16 MB", [s for s in scan.shapes if 4 * s["rows"] * s["cols"] < SMALL_BYTES]),
              ("16 MB and up", [s for s in scan.shapes if 4 * s["rows"] * s["cols"] >= SMALL_BYTES])]
    rows: List[List[str]] = []
    for name, group in groups:
        if not group:
            continue
        r8 = [ratio(s, "fastsoftmax_us") for s in group]
        low = min(group, key=lambda s: ratio(s, "fastsoftmax_us"))
        vs07 = [s["step08_us"] / s["fastsoftmax_us"] for s in group]
        worst07 = min(group, key=lambda s: s["step08_us"] / s["fastsoftmax_us"])
        cells = [name, str(len(group)),
                 f"{min(r8):.2f} ({shape_text(low)})", f"{statistics.median(r8):.2f}",
                 f"{sum(v >= 1.0 for v in vs07)} of {len(group)}; lowest "
                 f"{min(vs07):.3f} ({shape_text(worst07)})"]
        with_dnn = [s for s in group if "cudnn_us" in s]
        if with_dnn:
            h2h = [s["cudnn_us"] / s["fastsoftmax_us"] for s in with_dnn]
            worst = min(with_dnn, key=lambda s: s["cudnn_us"] / s["fastsoftmax_us"])
            cells.append(f"{sum(v > 1.0 for v in h2h)} of {len(with_dnn)}; lowest "
                         f"{min(h2h):.3f} ({shape_text(worst)})")
        else:
            cells.append("—")
        rows.append(cells)
    table = pr.md_table(["matrix (input bytes)", "shapes", "fastsoftmax: lowest ratio to memcpy",
                         "median", "at least as fast as step08 (step08's time / the library's)",
                         "faster than cuDNN (cuDNN's time / the library's)"],
                        "lrrrrr", rows)
    d = scan.doc
    drawn = (f"{d.get('drawn', len(scan.shapes))} shapes drawn with seed {d['seed']} "
             "(log-uniform: 2^10 to 2^27 elements, N from 1 to 2^21)")
    extra = len(scan.shapes) - d.get("drawn", len(scan.shapes))
    if extra > 0:
        drawn += f", and {extra} given"
    iters = d.get("iters", "?")
    # An int: that many launches at every shape; a string: the rule the scan applied per shape.
    runs = f"{iters} launches" if isinstance(iters, int) else str(iters)
    note = (f"{drawn}; each verified against the CPU reference up to 2^25 elements, then memcpy, "
            f"step08, the library and cuDNN timed in the same rounds, median of {runs}, L2 flushed "
            "before each.")
    return "\n".join([table, "", note, "", scan.source_line(md_path, root)])


def render_table(scan: Scan, md_path: Path, root: Path) -> str:
    rows = []
    for s in scan.shapes:
        dnn = "cudnn_us" in s
        rows.append([shape_text(s), s["plan"], f"{s['memcpy_us']:.2f}",
                     f"{ratio(s, 'step08_us'):.2f}", f"{ratio(s, 'fastsoftmax_us'):.2f}",
                     f"{ratio(s, 'cudnn_us'):.2f}" if dnn else "—",
                     f"{s['cudnn_us'] / s['fastsoftmax_us']:.2f}×" if dnn else "—",
                     s["verified"]])
    table = pr.md_table(["M×N", "the library's path", "memcpy µs", "step08", "fastsoftmax",
                         "cuDNN", "cuDNN's time / the library's", "verified"], "llrrrrrl", rows)
    return "\n".join([table, "", "Ratios: to a device-to-device memcpy of the same bytes timed "
                      "in the same rounds. " + scan.source_line(md_path, root)])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="?", type=Path, default=DEFAULT_JSON,
                    help=f"scan JSON (default: {DEFAULT_JSON.relative_to(pr.REPO_ROOT)})")
    ap.add_argument("--docs-root", type=Path, default=pr.REPO_ROOT, metavar="DIR",
                    help="directory holding README.md and docs/ (default: the repository)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a Markdown table would change")
    args = ap.parse_args(argv)
    try:
        scan = Scan(args.json)
        root = args.docs_root
        renderers = {
            "scan-summary": lambda a, md: render_summary(scan, md, root),
            "scan-table": lambda a, md: render_table(scan, md, root),
        }
        return pr.rewrite_tables(root, renderers, args.check, "scan tables", "scan_table.py")
    except pr.ToolError as e:
        print(f"scan_table.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
