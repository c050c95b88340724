# SPDX-License-Identifier: MIT
"""The charts of plot_results.py (matplotlib, imported only when a chart is drawn):
docs/img/bandwidth.png, staircase.png and long_rows.png (see plot_results.py's description).

Part of tools/plot_results.py, which re-exports every name here (import plot_results as pr).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

from bench_results import (FEW, GRID, IRREGULAR, LONG, STAIRCASE_NS, SWEEPS, Point, Results,
                          ToolError)
from md_tables import cuda_versions, fmt_ratio

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
