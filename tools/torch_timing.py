# SPDX-License-Identifier: MIT
"""torch_softmax_bench.py's timing, checking and output helpers: softmax_bench's timing rules
(L2 flush, interleaved rounds, the run counts), the check against a float64 softmax, and the
Google-Benchmark-like entries of the JSON. Every torch call takes the module as an argument, so
this file imports without PyTorch.
"""
from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

RUNS = 30                      # timed launches per point, as softmax_bench: 30, and
SHORT_RUNS = 200               # 200 where the shape moves at most SHORT_BYTES (2*M*N*4)
SHORT_BYTES = 64 << 20
WARMUP = 3
SPIN_CYCLES = 100_000          # about 50 us at 2 GHz: covers the launch latency of Python

ATOL = 1e-5                    # |y - reference| <= ATOL + RTOL * |reference| per element
RTOL = 1e-4                    # float32 sums over 1M terms round at about 1e-5 relative: torch
                               # reaches 1.3e-5 on a 0.997 peak at N = 1048576
ROW_TOL = 1e-4                 # max |sum of a row - 1|


class CheckFailed(RuntimeError):
    """A wrong result: the run stops with exit code 1."""


def effective_gbps(rows: int, cols: int, ms: float) -> float:
    """Same definition as softmax::effective_gbps: one read and one write of every element."""
    return 2.0 * rows * cols * 4 / (ms * 1e-3) / 1e9


def say(*args, **kwargs) -> None:
    print(*args, flush=True, **kwargs)


def note(text: str) -> None:
    print(f"torch_softmax_bench.py: {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------

class L2Flush:
    """Evicts L2 the way softmax::Timer::flush_l2 does: a write of the buffer (evicting whatever
    the previous launch left), then a read of it (so no dirty line of the flush is written back
    inside the next timing)."""

    def __init__(self, torch, l2_bytes: int):
        nbytes = max(2 * l2_bytes, 64 << 20) // 16 * 16
        self.buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        self.words = self.buf.view(torch.int32)
        self.count = 0
        self.sink = None

    def __call__(self) -> None:
        self.count += 1
        self.buf.fill_(self.count & 0xFF)
        self.sink = self.words.sum()   # a reduction kernel reads every byte; result unused


def runs_for(rows: int, cols: int, runs: Optional[int]) -> int:
    """Timed launches at rows x cols: `runs` when given, else softmax_bench's rule."""
    if runs is not None:
        return runs
    return SHORT_RUNS if 2 * rows * cols * 4 <= SHORT_BYTES else RUNS


def time_interleaved(torch, fns: Sequence[Callable[[], object]], flush: L2Flush, runs: int,
                     warmup: int) -> List[Tuple[float, float]]:
    """(median ms, min ms) of each of `fns`, as softmax::Timer::time_interleaved measures them:
    warm-up launches of each, then `runs` rounds that time each once, round i starting with
    fns[i mod n]; L2 flushed before every timed launch, CUDA events around the launch alone."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    spin = getattr(torch.cuda, "_sleep", None)
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    n = len(fns)
    ms: List[List[float]] = [[0.0] * runs for _ in range(n)]
    for i in range(runs):
        for k in range(n):
            j = (i + k) % n
            flush()
            if spin is not None:
                spin(SPIN_CYCLES)      # the GPU is still busy when the launch arrives
            start.record()
            fns[j]()
            stop.record()
            stop.synchronize()
            ms[j][i] = start.elapsed_time(stop)
    return [(statistics.median(v), min(v)) for v in ms]


# ------------------------------------------------------------------------------------------------
# Verification
# ------------------------------------------------------------------------------------------------

def reference(torch, x):
    """The softmax of x computed by torch in float64 on the upcast input."""
    return torch.softmax(x.double(), dim=-1)


def check_softmax(torch, impl: str, ref, y, rows: int, cols: int) -> None:
    """A sanity check that `y` is the softmax (not the repository's strict verification; these
    are other people's kernels): against float64, and row sums. NaN anywhere fails."""
    excess = ((y.double() - ref).abs() - (ATOL + RTOL * ref.abs())).max().item()
    err = (y.double() - ref).abs().max().item()
    row = (y.double().sum(dim=-1) - 1).abs().max().item()
    if not (excess <= 0 and row <= ROW_TOL):
        raise CheckFailed(f"{impl} at M={rows} N={cols} is wrong: max abs err {err:.3g} (limit "
                          f"{ATOL:g} + {RTOL:g} x |value|), max |row sum - 1| {row:.3g} (limit "
                          f"{ROW_TOL:g})")


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------

def nvidia_smi_facts() -> Dict[str, str]:
    facts: Dict[str, str] = {}
    if not shutil.which("nvidia-smi"):
        return facts
    select = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"] +
                       (["-i", select] if select else []), capture_output=True, text=True)
    if p.returncode == 0 and p.stdout.strip():
        facts["driver"] = p.stdout.strip().splitlines()[0].strip()
    m = re.search(r"CUDA Version:\s*([\d.]+)",
                  subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
    if m:
        facts["driver_cuda"] = m.group(1)
    return facts


def bench_name(impl: str, sweep: str, rows: int, cols: int) -> str:
    return f"{impl}/{sweep}/M:{rows}/N:{cols}/iterations:1/manual_time"


def entry(impl: str, sweep: str, rows: int, cols: int, median_ms: float, min_ms: float,
          memcpy_ms: float) -> Dict[str, object]:
    """One Google-Benchmark-like entry, counters as softmax_bench writes them."""
    name = bench_name(impl, sweep, rows, cols)
    gbps, memcpy_gbps = effective_gbps(rows, cols, median_ms), effective_gbps(rows, cols, memcpy_ms)
    return {
        "name": name, "family_index": 0, "per_family_instance_index": 0, "run_name": name,
        "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1,
        "iterations": 1, "real_time": median_ms * 1e3, "cpu_time": 0.0, "time_unit": "us",
        "GBps": gbps, "M": float(rows), "N": float(cols), "bytes_per_second": gbps * 1e9,
        "median_us": median_ms * 1e3, "memcpy_GBps": memcpy_gbps, "min_us": min_ms * 1e3,
        "model_bytes": 2.0 * rows * cols * 4, "ratio_to_memcpy": gbps / memcpy_gbps, "label": impl,
    }


def skipped_entry(impl: str, sweep: str, rows: int, cols: int, why: str) -> Dict[str, object]:
    """A shape an implementation could not run, as Google Benchmark writes SkipWithError."""
    name = bench_name(impl, sweep, rows, cols)
    return {
        "name": name, "family_index": 0, "per_family_instance_index": 0, "run_name": name,
        "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1,
        "error_occurred": True, "error_message": why,
        "iterations": 0, "real_time": 0.0, "cpu_time": 0.0, "time_unit": "us",
        "M": float(rows), "N": float(cols), "label": impl,
    }
