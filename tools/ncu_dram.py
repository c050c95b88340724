# SPDX-License-Identifier: MIT
"""dram_traffic.py's profiling side: finds Nsight Compute, runs one verified launch of
build/softmax_profile under it, parses its --csv output into bytes per kernel, keeps the kernels
that belong to the step, and reads the GPU's and ncu's versions for the JSON's context.
"""
from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (ToolError, STEP_RE)

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
NCU_OPTIONS = ("--clock-control", "none", "--cache-control", "all", "--print-units", "base",
               "--print-kernel-base", "mangled", "--metrics", ",".join(METRICS), "--csv")
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


# Lessons that launch an earlier lesson's kernels as well as their own: step08 hands the rows it
# does not split over a cluster to step07's kernels (step08_cluster/CMakeLists.txt links them).
BORROWED = {"step08_cluster": ("step07_persistent",)}


def owns(step: str, kernel: str) -> bool:
    """Whether a kernel belongs to the step: a step's kernels live in its namespace (or in that of
    a lesson it borrows from), the unfused baseline's in baselines::; cuDNN's are the library's
    own, and the launch runs nothing else."""
    if pr.STEP_RE.match(step):
        return any(in_namespace(ns, kernel) for ns in (step, *BORROWED.get(step, ())))
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
        raise pr.ToolError(f"{where}: none of the profiled kernels is in namespace "
                           f"{' or '.join(n + '::' for n in (step, *BORROWED.get(step, ())))}")

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
