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
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (the marker code and the provenance helpers)

REPO_ROOT = pr.REPO_ROOT
DEFAULT_SHAPES = ((4096, 4096), (1823, 781))
METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
NCU_OPTIONS = ("--clock-control", "none", "--cache-control", "all", "--print-units", "base",
               "--print-kernel-base", "mangled", "--metrics", ",".join(METRICS), "--csv")
BASELINES = ("unfused", "cudnn")
EXIT_NO_GPU = 77

# Byte units ncu may print. --print-units base asks for plain bytes; the others are here in case a
# version ignores it. Nsight Compute scales by powers of 1000 (Kbyte = 1e3 bytes).
UNIT_BYTES = {"byte": 1, "bytes": 1, "b": 1,
              "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
              "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
              "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}

MODEL_RE = re.compile(r"model_read_bytes=(\S+)\s+model_write_bytes=(\S+)")


class NoGpu(pr.ToolError):
    """No usable GPU (softmax_profile's exit code 77)."""


class Missing(pr.ToolError):
    """A tool or a build output this script needs is not there."""


# ------------------------------------------------------------------------------------------------
# Running ncu
# ------------------------------------------------------------------------------------------------

def find_ncu(given: Optional[str]) -> str:
    for candidate in (given, os.environ.get("NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if candidate and (shutil.which(candidate) or os.access(candidate, os.X_OK)):
            return candidate
    raise Missing("Nsight Compute (ncu) not found: it ships with the CUDA toolkit "
                       "(/usr/local/cuda/bin/ncu); put it on PATH, set NCU, or pass --ncu PATH")


def run(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True)


def tail(text: str, lines: int = 15) -> str:
    return "\n".join("    " + l for l in text.strip().splitlines()[-lines:])


def probe(profile: Path, step: str) -> subprocess.CompletedProcess:
    """One tiny verified launch without the profiler: is there a GPU, does the step exist?"""
    p = run([str(profile), step, "1", "1"])
    if p.returncode == EXIT_NO_GPU:
        raise NoGpu(f"no usable GPU: {(p.stderr or p.stdout).strip()}")
    return p


def to_bytes(value: str, unit: str, where: str) -> float:
    text = value.replace(",", "").replace("\u202f", "").strip()   # ncu may group thousands
    scale = UNIT_BYTES.get(unit.strip().lower())
    if scale is None:
        raise pr.ToolError(f"{where}: unknown unit '{unit}' (expected byte, Kbyte, Mbyte, Gbyte)")
    try:
        return float(text) * scale
    except ValueError:
        raise pr.ToolError(f"{where}: metric value '{value}' is not a number")


def parse_ncu_csv(text: str, where: str) -> List[Dict[str, object]]:
    """The kernels of ncu's --csv 'details' output, in launch order: name and bytes per metric."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise pr.ToolError(f"{where}: no CSV table in ncu's output (no kernel profiled?)\n{tail(text)}")
    # Only quoted lines belong to the table; anything else is the program's or ncu's own output.
    reader = csv.DictReader([lines[start]] + [l for l in lines[start + 1:] if l.startswith('"')])
    need = {"ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"}
    missing = need - set(reader.fieldnames or ())
    if missing:
        raise pr.ToolError(f"{where}: ncu's CSV has no column {', '.join(sorted(missing))}")
    kernels: Dict[str, Dict[str, object]] = {}
    for row in reader:
        k = kernels.setdefault(row["ID"], {"name": row["Kernel Name"], "bytes": {}})
        k["bytes"][row["Metric Name"]] = to_bytes(row["Metric Value"], row["Metric Unit"], where)
    for k in kernels.values():
        absent = [m for m in METRICS if m not in k["bytes"]]
        if absent:
            raise pr.ToolError(f"{where}: kernel {k['name']} has no {', '.join(absent)}")
    return list(kernels.values())


def in_namespace(namespace: str, mangled: str) -> bool:
    """Whether an Itanium-mangled name (_ZN12step00_naive14softmax_kernel...) is in a namespace:
    its nested name starts with the namespace's length and name."""
    return f"_ZN{len(namespace)}{namespace}" in mangled


def owns(step: str, kernel: str) -> bool:
    """Whether a kernel belongs to the step: a step's kernels live in its namespace, the unfused
    baseline's in baselines::; cuDNN's are the library's own, and the launch runs nothing else."""
    if pr.STEP_RE.match(step):
        return in_namespace(step, kernel)
    if step == "unfused":
        return in_namespace("baselines", kernel)
    return True


def profile_one(ncu: str, profile: Path, step: str, rows: int, cols: int) -> Dict[str, object]:
    where = f"{step} {rows}x{cols}"
    cmd = [ncu, *NCU_OPTIONS, str(profile), step, str(rows), str(cols)]
    p = run(cmd)
    out = p.stdout + "\n" + p.stderr
    if "ERR_NVGPUCTRPERM" in out:
        raise pr.ToolError("ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run "
                           "as root or allow profiling for all users, see "
                           "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    if p.returncode != 0:
        raise pr.ToolError(f"{where}: `{shlex.join(cmd)}` exited with {p.returncode}\n{tail(out)}")
    model = MODEL_RE.search(p.stdout)
    if not model:
        raise pr.ToolError(f"{where}: softmax_profile printed no 'model_read_bytes=... "
                           f"model_write_bytes=...' line; rebuild it (cmake --build build)")
    # softmax_profile's verdict: "STEP RxC: PASS: ..." (the exit code says the same, but not every
    # ncu version passes the program's exit code on).
    verify = next((l.strip() for l in p.stdout.splitlines() if l.startswith(f"{step} {rows}x{cols}:")), "")
    if ": PASS" not in verify:
        raise pr.ToolError(f"{where}: the launch did not verify\n{tail(p.stdout)}")
    kernels = parse_ncu_csv(p.stdout, where)
    if not kernels:
        raise pr.ToolError(f"{where}: ncu profiled no kernel")
    mine = [k for k in kernels if owns(step, str(k["name"]))]
    foreign = [k for k in kernels if not owns(step, str(k["name"]))]
    if foreign:
        print(f"warning: {where}: not counted, not the step's: "
              f"{', '.join(str(k['name']) for k in foreign)}", file=sys.stderr)
    if not mine:
        raise pr.ToolError(f"{where}: none of the profiled kernels is in namespace {step}::")

    def total(metric: str) -> float:
        return sum(float(k["bytes"][metric]) for k in mine)

    return {
        "step": step, "rows": rows, "cols": cols,
        "measured_read_bytes": total(METRICS[0]), "measured_write_bytes": total(METRICS[1]),
        "model_read_bytes": float(model.group(1)), "model_write_bytes": float(model.group(2)),
        "kernels": [{"name": k["name"], "read_bytes": k["bytes"][METRICS[0]],
                     "write_bytes": k["bytes"][METRICS[1]]} for k in mine],
        "excluded_kernels": [k["name"] for k in foreign],
        "verify": verify,
    }


def gpu_facts() -> Dict[str, str]:
    """GPU name, driver and the driver's CUDA version from nvidia-smi (the first visible GPU)."""
    facts = {"gpu_name": "unknown", "driver": "unknown", "driver_cuda": "unknown"}
    if not shutil.which("nvidia-smi"):
        return facts
    select = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    for key, field in (("gpu_name", "name"), ("driver", "driver_version")):
        p = run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"] +
                (["-i", select] if select else []))
        if p.returncode == 0 and p.stdout.strip():
            facts[key] = p.stdout.strip().splitlines()[0].strip()
    m = re.search(r"CUDA Version:\s*([\d.]+)", run(["nvidia-smi"]).stdout)
    if m:
        facts["driver_cuda"] = m.group(1)
    return facts


def ncu_version(ncu: str) -> str:
    m = re.search(r"Version\s+(\S+)", run([ncu, "--version"]).stdout)
    return m.group(1) if m else "unknown"


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
                         "<gpu> as in tools/reproduce.sh, e.g. h100)")
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
