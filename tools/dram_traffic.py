#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Measured DRAM traffic of every step against its traffic model, with Nsight Compute.

For each step (the stepNN_* folders, then the baselines unfused and, when the build has it,
cudnn) and each shape (4096x4096, the bandwidth shape; 1823x781, the correctness shape, which
fits in L2), runs one verified launch under ncu:

  ncu --clock-control none --cache-control all --print-units base --print-kernel-base mangled
      --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv
      build/softmax_profile STEP ROWS COLS

sums the two metrics over the launch's kernels (unfused runs five) and compares them with the
modeled bytes that softmax_profile prints (`model_read_bytes=... model_write_bytes=...`, from the
step's traffic()). Writes the raw numbers to a JSON and rewrites the tables between

  <!-- BEGIN dram-table -->                         every run
  <!-- BEGIN dram-table step03_block -->            that step's runs (a baseline's name works too)
  <!-- BEGIN dram-table upto=step03_block -->       the steps up to step03_block
  <!-- BEGIN dram-table shape=4096x4096 -->         one shape (combines with the two above)
  <!-- BEGIN dram-table data=FILE.json -->           from docs/results/FILE.json (default: the
                                                     dram_traffic_<gpu>.json this tool writes);
                                                     a run with another JSON leaves it alone
  <!-- END dram-table -->

in README.md and docs/*.md (same marker rules as tools/plot_results.py).

  python3 tools/dram_traffic.py [--out FILE] [--steps a,b] [--shapes 4096x4096,1823x781]
                                [--build-dir build] [--ncu PATH] [--commit C] [--command C]
  python3 tools/dram_traffic.py --from-json FILE [--check]    (tables only; no GPU needed)

Exit codes: 0 done; 1 a run failed or (--check) a table would change; 2 usage or missing tool;
77 no GPU.

Running ncu and reading its CSV (find_ncu, profile_one, gpu_facts) are in tools/ncu_dram.py.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (the marker code and the provenance helpers)
# Running ncu and reading its output (tools/ncu_dram.py).
from ncu_dram import (EXIT_NO_GPU, NCU_OPTIONS, Missing, NoGpu, find_ncu, gpu_facts,  # noqa: E402
                      ncu_version, probe, profile_one, tail)

REPO_ROOT = pr.REPO_ROOT
DEFAULT_SHAPES = ((4096, 4096), (1823, 781))
BASELINES = ("unfused", "cudnn")


def shown_path(path: Path) -> str:
    """A path as the reader would type it: relative to the repository when inside it."""
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def measure(args: argparse.Namespace) -> Dict[str, object]:
    ncu = find_ncu(args.ncu)
    profile = args.build_dir / "softmax_profile"
    if not profile.exists():
        raise Missing(f"{profile} not built: cmake --preset default && cmake --build build")
    if args.steps:
        steps = [s for s in args.steps.split(",") if s]
    else:
        steps = sorted(p.name for p in REPO_ROOT.glob("step[0-9][0-9]_*") if p.is_dir())
        steps += ["fastsoftmax", "unfused"]
    first = probe(profile, steps[0])
    if first.returncode != 0:
        raise pr.ToolError(f"`{profile} {steps[0]} 1 1` failed ({first.returncode}):\n"
                           f"{tail(first.stdout + first.stderr)}")
    if not args.steps:
        if probe(profile, "cudnn").returncode == 0:
            steps.append("cudnn")
        else:
            print("note: this build has no cuDNN; its baseline is left out", file=sys.stderr)

    facts = gpu_facts()
    doc: Dict[str, object] = {
        "context": {
            **facts,
            "ncu_version": ncu_version(ncu),
            "ncu_options": " ".join(NCU_OPTIONS),
            "profiled_command": f"{shown_path(profile)} STEP ROWS COLS",
            "commit": args.commit or pr.git_commit(),
            "command": args.command or shlex.join(["tools/dram_traffic.py", *args.argv]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        },
        "runs": [],
    }
    print(f"{facts['gpu_name']}, ncu {doc['context']['ncu_version']}: {', '.join(steps)} at "
          f"{', '.join(f'{r}x{c}' for r, c in args.shapes)}")
    for rows, cols in args.shapes:
        for step in steps:
            r = profile_one(ncu, profile, step, rows, cols)
            doc["runs"].append(r)
            total = (r["measured_read_bytes"] + r["measured_write_bytes"]) / \
                (r["model_read_bytes"] + r["model_write_bytes"])
            print(f"  {step:22s} {rows}x{cols:<6d} read {r['measured_read_bytes'] / 1e6:9.1f} MB "
                  f"(model {r['model_read_bytes'] / 1e6:9.1f})  write {r['measured_write_bytes'] / 1e6:9.1f} MB "
                  f"(model {r['model_write_bytes'] / 1e6:9.1f})  measured/model {total:.2f}")
    return doc


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------

def load_doc(path: Path) -> Dict[str, object]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise pr.ToolError(f"{path}: no such file")
    except json.JSONDecodeError as e:
        raise pr.ToolError(f"{path}: not valid JSON ({e})")
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise pr.ToolError(f"{path}: no 'runs' list; not written by tools/dram_traffic.py?")
    keys = ("step", "rows", "cols", "measured_read_bytes", "measured_write_bytes",
            "model_read_bytes", "model_write_bytes")
    for i, r in enumerate(doc["runs"]):
        absent = [k for k in keys if k not in r]
        if absent:
            raise pr.ToolError(f"{path}: runs[{i}] lacks {', '.join(absent)}")
    return doc


def parse_shape(text: str) -> Tuple[int, int]:
    m = re.fullmatch(r"(\d+)[x×](\d+)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"'{text}' is not ROWSxCOLS")
    return int(m.group(1)), int(m.group(2))


def mb(x: float) -> str:
    return f"{x / 1e6:.1f}"


def render_dram_table(doc: Dict[str, object], path: Path, args: str, md_path: Path,
                      root: Path) -> Optional[str]:
    opts, words = pr.parse_marker_args(args, ("upto", "shape", "data"), "dram-table")
    # A block names the JSON it is drawn from (data=FILE in docs/results), by default the one
    # this tool writes without --out; blocks of other files are left alone.
    default = f"dram_traffic_{pr.gpu_slug(str(doc['context']['gpu_name']))}.json"
    if path.name != opts.get("data", default):
        return None
    runs: List[Dict[str, object]] = list(doc["runs"])
    steps = list(dict.fromkeys(str(r["step"]) for r in runs if pr.STEP_RE.match(str(r["step"]))))
    if len(words) > 1 or (words and "upto" in opts):
        raise pr.MarkerError("dram-table: name at most one step, or give upto=STEP, not both")
    if words:                                                  # one step's (or baseline's) rows
        names = list(dict.fromkeys(str(r["step"]) for r in runs))
        if words[0] not in names:
            raise pr.MarkerError(f"dram-table: no step named '{words[0]}' in {path} "
                                 f"(it has: {', '.join(names)})")
        runs = [r for r in runs if r["step"] == words[0]]
    if "upto" in opts:
        if opts["upto"] not in steps:
            raise pr.MarkerError(f"dram-table upto: no step named '{opts['upto']}' in {path} "
                                 f"(it has: {', '.join(steps) or 'none'})")
        keep = set(steps[: steps.index(opts["upto"]) + 1])
        runs = [r for r in runs if r["step"] in keep]        # a chapter's table: its steps only
    if "shape" in opts:
        try:
            shape = parse_shape(opts["shape"])
        except argparse.ArgumentTypeError as e:
            raise pr.MarkerError(f"dram-table shape: {e}")
        runs = [r for r in runs if (r["rows"], r["cols"]) == shape]
        if not runs:
            raise pr.MarkerError(f"dram-table: no run at {opts['shape']} in {path}")

    # Shapes in the order measured; within a shape, the steps in order, then the baselines.
    shapes = list(dict.fromkeys((r["rows"], r["cols"]) for r in runs))
    rank = {name: i for i, name in enumerate(steps)}
    runs.sort(key=lambda r: (shapes.index((r["rows"], r["cols"])),
                             rank.get(str(r["step"]), len(rank)), str(r["step"])))
    rows = []
    for r in runs:
        model = r["model_read_bytes"] + r["model_write_bytes"]
        measured = r["measured_read_bytes"] + r["measured_write_bytes"]
        rows.append([f"`{r['step']}`", f"{r['rows']}×{r['cols']}",
                     mb(r["model_read_bytes"]), mb(r["measured_read_bytes"]),
                     mb(r["model_write_bytes"]), mb(r["measured_write_bytes"]),
                     f"{measured / model:.2f}" if model else pr.NOT_MEASURED])
    table = pr.md_table(["step", "shape", "modeled read MB", "measured read MB", "modeled write MB",
                         "measured write MB", "measured/modeled total"], "llrrrrr", rows)

    c = doc.get("context", {})

    def ctx(key: str, default: str = "unknown") -> str:
        value = c.get(key)
        return default if value in (None, "") else str(value)

    method = (f"MB = 10⁶ bytes. Measured: `dram__bytes_read.sum` and `dram__bytes_write.sum` "
              f"summed over the kernels of one verified launch of `{ctx('profiled_command')}` under "
              f"`ncu {ctx('ncu_options')}` (the cache control flushes L2 before each kernel). "
              f"Modeled: the step's `traffic()`.")
    source = (f"Measured on {ctx('gpu_name')}, driver {ctx('driver')}, CUDA {ctx('driver_cuda')}, "
              f"Nsight Compute {ctx('ncu_version')}, commit `{ctx('commit', 'not recorded')}`, "
              f"{ctx('date')[:10]}; command: `{ctx('command')}`; data: "
              f"{pr.link_from(md_path, path, root)}.")
    return "\n".join([table, "", method, "", source])


# ------------------------------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from-json", type=Path, metavar="FILE",
                    help="render the tables from a saved JSON; runs nothing on the GPU")
    ap.add_argument("--out", type=Path, metavar="FILE",
                    help="where the JSON goes (default: docs/results/dram_traffic_<gpu>.json, "
                         "<gpu> as in tools/reproduce.sh, e.g. h200)")
    ap.add_argument("--steps", metavar="A,B", help="steps and baselines to profile (default: every "
                    "stepNN_* folder, unfused, and cudnn when built)")
    ap.add_argument("--shapes", type=lambda s: [parse_shape(x) for x in s.split(",") if x],
                    default=list(DEFAULT_SHAPES), metavar="RxC,...",
                    help="shapes (default: 4096x4096,1823x781)")
    ap.add_argument("--build-dir", type=Path, default=REPO_ROOT / "build", metavar="DIR")
    ap.add_argument("--ncu", metavar="PATH", help="ncu executable (default: $NCU, PATH, "
                    "/usr/local/cuda/bin/ncu)")
    ap.add_argument("--commit", help="commit to record (default: git's HEAD, -dirty if modified)")
    ap.add_argument("--command", help="command to record (default: this command line)")
    ap.add_argument("--docs-root", type=Path, default=REPO_ROOT, metavar="DIR",
                    help="directory holding README.md and docs/ (default: the repository)")
    ap.add_argument("--no-tables", action="store_true", help="measure and write the JSON only")
    ap.add_argument("--check", action="store_true",
                    help="with --from-json: write nothing; exit 1 if a table would change")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.check and not args.from_json:
        ap.error("--check needs --from-json")

    try:
        if args.from_json:
            path = args.from_json
            doc = load_doc(path)
        else:
            doc = measure(args)
            path = args.out or (REPO_ROOT / "docs" / "results" /
                                f"dram_traffic_{pr.gpu_slug(str(doc['context']['gpu_name']))}.json")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
            print(f"wrote      {os.path.relpath(path)}")
        if not args.no_tables:
            root = args.docs_root
            renderers = {"dram-table": lambda a, md: render_dram_table(doc, path, a, md, root)}
            if pr.update_markdown(root, renderers, args.check) and args.check:
                print("dram tables are out of date: run tools/dram_traffic.py --from-json "
                      f"{path}", file=sys.stderr)
                return 1
    except NoGpu as e:
        print(f"dram_traffic.py: {e}", file=sys.stderr)
        return EXIT_NO_GPU
    except (Missing, pr.MarkerError) as e:
        print(f"dram_traffic.py: {e}", file=sys.stderr)
        return 2
    except pr.ToolError as e:
        print(f"dram_traffic.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
