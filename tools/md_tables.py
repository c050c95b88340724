# SPDX-License-Identifier: MIT
"""The Markdown side of the generated tables: cell formatting, md_table, the provenance and
method sentences under every table, marker arguments, and the rewriting of the blocks between
<!-- BEGIN kind args --> / <!-- END kind --> in README.md and docs/*.md (rewrite_markers,
update_markdown), which tools/dram_traffic.py, limits_table.py and scan_table.py use too.

Part of tools/plot_results.py, which re-exports every name here (import plot_results as pr).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from bench_results import NOT_MEASURED, MarkerError, MissingStep, Results

# ------------------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------------------

def fmt_gbps(x: float) -> str:
    return f"{x:.0f}"


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}"


def fmt_speedup(x: float) -> str:
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


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
# Marker arguments
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
