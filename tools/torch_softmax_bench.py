#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch.softmax and Triton's fused-softmax tutorial kernel on float32, timed the way
build/bench/softmax_bench times the steps, with a device-to-device memcpy of the same bytes.

Implementations (the label of each entry):

  memcpy   y.copy_(x): a device-to-device copy of the same bytes, the practical ceiling
  torch    torch.softmax(x, dim=-1): PyTorch's own kernel
  triton   the kernel of Triton's fused-softmax tutorial, written here from its description: a
           persistent kernel whose programs each take rows first, first + P, first + 2P, ... (P
           programs, a tl.range loop with software pipelining), one whole row per iteration held
           in registers (BLOCK_SIZE = next power of two >= N, masked load with -inf padding,
           max, exp, sum, divide, masked store), num_warps = 8, 4 pipeline stages when the device
           allows more than 200 KB of shared memory per block, else 2. P = SMs x occupancy,
           occupancy = min(register file // (registers per thread x 32 x 8),
                           shared memory per block // the kernel's shared memory),
           the device's numbers as Triton reports them (max_num_regs, max_shared_mem), the
           kernel's from compiling it first (kernel.warmup: n_regs, metadata.shared); P <= M.
           N is a plain runtime argument, so Triton compiles one kernel per BLOCK_SIZE (and per
           N divisible by 16 or not), not one per N. A shape whose BLOCK_SIZE is over 65536, or
           whose kernel does not compile or load, is skipped with a message (an entry with
           error_occurred), not a failure. Without an importable triton the peer is skipped with
           a message and the rest runs as usual.

Sweeps (benchmark names "<impl>/<sweep>/M:<M>/N:<N>/iterations:1/manual_time"):

  grid       M = 4096, N = 128*i for i = 2..128 (the grid of Triton's tutorial)
  irregular  M = 4096, N = 97*k for k = 3..168 (N takes every residue mod 4: most rows start
             off a 16-byte boundary)
  short      M x N = 65536x32, 65536x64, 65536x128, 16384x256, 65536x61, 65536x127
  long       M*N = 2^27 (512 MiB in, 512 MiB out): N = 2^14 ... 2^20, and each N + 3
  few        M x N = 1x1048576, 8x1048576, 64x262144, 32x16384, 128x4096

Method, as in common/timer.cu: each shape gets fresh seeded inputs (normal values and one planted
peak per row). Before anything is timed, torch and triton are each checked against a softmax
computed by torch in float64 on the upcast input: every element within 1e-5, every row summing to
1 within 1e-4; triton's output is poisoned with NaN first and has guard zones either side, so an
unwritten element or a write out of bounds fails too. Then 3 warm-up launches of each; then 200
rounds where the shape moves at most 64 MiB (2*M*N*4 bytes) and 30 above, as softmax_bench, each
timing memcpy, torch and triton once, in an order that rotates from round to round (round i starts
with implementation i mod the number timed), so drift reaches all of them alike.
Before each timed launch L2 is flushed (a write of max(2 x L2, 64 MB) followed by a read of it)
and the GPU is given a ~50 us spin (torch.cuda._sleep, touching no memory) so that Python's launch
latency never falls between the events; CUDA events around the launch alone; the median and the
minimum. Effective bandwidth = 2*M*N*4 bytes / median time; ratio_to_memcpy uses the memcpy timed
in the same rounds.

The output is the benchmark's JSON schema (a Google Benchmark JSON: context, and entries with
label <impl> and counters M, N, GBps, memcpy_GBps, ratio_to_memcpy, median_us, min_us,
model_bytes), so tools/plot_results.py can overlay it:

  python3 tools/torch_softmax_bench.py [--out FILE] [--sweeps grid,irregular,short] [--no-triton]
                                       [--runs K] [--commit C] [--command C]
  python3 tools/plot_results.py docs/results/bench_h100.json --extra docs/results/torch_h100.json

Exit codes: 0 done (also when the Triton peer, or some of its shapes, were skipped); 1 a check
failed (a wrong result, a write out of bounds, a CUDA error); 2 torch missing or bad arguments;
77 no GPU.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (provenance helpers)

RUNS = 30                      # timed launches per point, as softmax_bench: 30, and
SHORT_RUNS = 200               # 200 where the shape moves at most SHORT_BYTES (2*M*N*4)
SHORT_BYTES = 64 << 20
WARMUP = 3
EXIT_NO_GPU = 77
SPIN_CYCLES = 100_000          # about 50 us at 2 GHz: covers the launch latency of Python
SEED = 20240607

# The five sweeps, as softmax_bench emits them: name -> list of (M, N).
SWEEPS: Dict[str, List[Tuple[int, int]]] = {
    "grid": [(4096, 128 * i) for i in range(2, 129)],
    "irregular": [(4096, 97 * k) for k in range(3, 169)],
    "short": [(65536, 32), (65536, 64), (65536, 128), (16384, 256), (65536, 61), (65536, 127)],
    "long": [(1 << (27 - e), (1 << e) + d) for e in range(14, 21) for d in (0, 3)],
    "few": [(1, 1048576), (8, 1048576), (64, 262144), (32, 16384), (128, 4096)],
}
# The "sweeps" context value, word for word as softmax_bench writes it.
SWEEP_TEXT = {
    "grid": "grid: M=4096 N=128*i i=2..128",
    "irregular": "irregular: M=4096 N=97*k k=3..168",
    "short": "short: " + ",".join(f"{m}x{n}" for m, n in SWEEPS["short"]),
    "long": "long: M*N=2^27 N=2^14..2^20 and N+3",
    "few": "few: " + ",".join(f"{m}x{n}" for m, n in SWEEPS["few"]),
}
ROWS = 4096                    # the M of the grid sweep: the "rows" of the context

LESSONS = {
    "memcpy": "device-to-device copy of the same bytes (y.copy_(x)): the practical ceiling",
    "torch": "torch.softmax(x, dim=-1): PyTorch's own softmax kernel",
    "triton": "Triton's fused-softmax tutorial kernel (persistent programs, one row per iteration)",
}

# Triton peer settings, as the tutorial chooses them.
TRITON_NUM_WARPS = 8
TRITON_MAX_BLOCK = 65536
TRITON_BIG_SMEM = 200_000      # more shared memory per block than this: 4 stages, else 2

ATOL = 1e-5                    # |y - reference| <= ATOL + RTOL * |reference| per element
RTOL = 1e-4                    # float32 sums over 1M terms round at about 1e-5 relative: torch
                               # reaches 1.3e-5 on a 0.997 peak at N = 1048576
ROW_TOL = 1e-4                 # max |sum of a row - 1|
GUARD = 1024                   # float elements of guard zone either side of triton's output
GUARD_VALUE = 12345.0


class CheckFailed(RuntimeError):
    """A wrong result: the run stops with exit code 1."""


class TritonSkip(Exception):
    """A shape the Triton peer cannot run (block too large, no compile): skipped, not failed."""


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
# The Triton peer
# ------------------------------------------------------------------------------------------------

triton = None   # set by load_triton_kernel
tl = None


def load_triton_kernel():
    """Imports triton and defines the kernel. Raises ImportError (or another exception from
    triton) when triton cannot be used."""
    global triton, tl
    import triton                    # noqa: F811
    import triton.language as tl     # noqa: F811

    @triton.jit
    def softmax_persistent(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                           BLOCK_SIZE: tl.constexpr, STAGES: tl.constexpr):
        # Program p takes rows p, p + P, p + 2P, ... (P programs in all), one row per iteration;
        # the loop is software-pipelined over STAGES iterations.
        first = tl.program_id(0)
        stride = tl.num_programs(0)
        cols = tl.arange(0, BLOCK_SIZE)
        in_row = cols < n_cols
        for row in tl.range(first, n_rows, stride, num_stages=STAGES):
            r = tl.cast(row, tl.int64)         # M*N may pass 2^31 elements
            v = tl.load(x_ptr + r * x_row_stride + cols, mask=in_row, other=-float("inf"))
            e = tl.exp(v - tl.max(v, axis=0))  # padding: exp(-inf) = 0, adds nothing
            tl.store(y_ptr + r * y_row_stride + cols, e / tl.sum(e, axis=0), mask=in_row)

    return softmax_persistent


@dataclass
class TritonLaunch:
    block: int
    regs: int
    smem: int
    by_regs: int
    by_smem: int
    occupancy: int
    programs: int

    def describe(self) -> str:
        return (f"BLOCK_SIZE {self.block}: {self.regs} registers/thread, {self.smem} B shared, "
                f"occupancy min({self.by_regs} by registers, {self.by_smem} by shared memory) = "
                f"{self.occupancy}/SM, {self.programs} programs")


class TritonSoftmax:
    """The tutorial's host side: the program count from the compiled kernel's resources."""

    def __init__(self, torch, device: int):
        self.kernel = load_triton_kernel()
        self.version = str(getattr(triton, "__version__", "unknown"))
        props = self._device_properties(torch, device)
        self.sm_count = int(props["multiprocessor_count"])
        self.regs_per_sm = int(props["max_num_regs"])   # 64K: per block, also per SM
        self.smem_per_block = int(props["max_shared_mem"])
        self.warp_size = int(props.get("warpSize", 32))
        self.stages = 4 if self.smem_per_block > TRITON_BIG_SMEM else 2
        self.seen: Dict[Tuple[int, int, int, int], str] = {}   # kernels described so far

    @staticmethod
    def _device_properties(torch, device: int) -> Dict[str, int]:
        """Triton's view of the device (what the tutorial reads); torch's where it has none."""
        try:
            props = dict(triton.runtime.driver.active.utils.get_device_properties(device))
        except Exception:   # an older or different triton: use torch's numbers
            props = {}
        tp = torch.cuda.get_device_properties(device)
        props.setdefault("multiprocessor_count", tp.multi_processor_count)
        props.setdefault("max_num_regs", getattr(tp, "regs_per_multiprocessor", 65536))
        props.setdefault("max_shared_mem", getattr(tp, "shared_memory_per_block_optin", 49152))
        props.setdefault("warpSize", getattr(tp, "warp_size", 32))
        return props

    def plan(self, y, x) -> TritonLaunch:
        """Compiles (or finds) the kernel for this shape and sizes the grid; TritonSkip if not."""
        rows, cols = x.shape
        block = triton.next_power_of_2(cols)
        if block > TRITON_MAX_BLOCK:
            raise TritonSkip(f"BLOCK_SIZE {block} is over {TRITON_MAX_BLOCK}: one row does not "
                             f"fit the kernel")
        try:
            t0 = time.perf_counter()
            compiled = self.kernel.warmup(y, x, x.stride(0), y.stride(0), rows, cols,
                                          BLOCK_SIZE=block, STAGES=self.stages,
                                          num_warps=TRITON_NUM_WARPS, num_stages=self.stages,
                                          grid=(1,))
            init = getattr(compiled, "_init_handles", None)
            if init is not None:
                init()                           # loads the binary: n_regs, and the smem check
            regs = int(compiled.n_regs)
            meta = getattr(compiled, "metadata", None)
            smem = meta.get("shared") if isinstance(meta, dict) else getattr(meta, "shared", None)
            smem = int(smem if smem is not None else getattr(compiled, "shared"))
            seconds = time.perf_counter() - t0
        except Exception as e:  # compile errors, OutOfResources, ...: skip this shape
            first = (str(e).strip().splitlines() or [""])[0][:300]
            raise TritonSkip(f"BLOCK_SIZE {block} did not compile or load "
                             f"({type(e).__name__}: {first})") from e
        by_regs = self.regs_per_sm // max(1, regs * self.warp_size * TRITON_NUM_WARPS)
        by_smem = self.smem_per_block // smem if smem > 0 else by_regs
        occupancy = max(1, min(by_regs, by_smem))
        launch = TritonLaunch(block, regs, smem, by_regs, by_smem, occupancy,
                              min(self.sm_count * occupancy, rows))
        key = (block, cols % 16 == 0, regs, smem)
        if key not in self.seen:
            self.seen[key] = launch.describe()
            say(f"  triton kernel {launch.describe()} (N % 16 {'==' if cols % 16 == 0 else '!='} "
                f"0; ready in {seconds:.1f} s)")
        return launch

    def launcher(self, launch: TritonLaunch, y, x) -> Callable[[], None]:
        rows, cols = x.shape
        run = self.kernel[(launch.programs,)]
        sx, sy, block, stages = x.stride(0), y.stride(0), launch.block, self.stages

        def fn() -> None:
            run(y, x, sx, sy, rows, cols, BLOCK_SIZE=block, STAGES=stages,
                num_warps=TRITON_NUM_WARPS, num_stages=stages)
        return fn

    def verified_run(self, torch, launch: TritonLaunch, x, ref) -> None:
        """One launch into a NaN-poisoned output with guard zones either side; CheckFailed if a
        guard changed or the result is wrong."""
        rows, cols = x.shape
        buf = torch.full((rows * cols + 2 * GUARD,), GUARD_VALUE, dtype=torch.float32,
                         device="cuda")
        y = buf[GUARD:GUARD + rows * cols].view(rows, cols)
        y.fill_(float("nan"))
        self.launcher(launch, y, x)()
        torch.cuda.synchronize()
        guards = torch.cat([buf[:GUARD], buf[GUARD + rows * cols:]])
        if not bool((guards == GUARD_VALUE).all()):
            raise CheckFailed(f"triton at M={rows} N={cols} wrote outside its output")
        check_softmax(torch, "triton", ref, y, rows, cols)

    def context(self) -> Dict[str, str]:
        return {
            "version:triton": self.version,
            "triton_launch": (f"num_warps={TRITON_NUM_WARPS}, num_stages={self.stages}; programs = "
                              f"{self.sm_count} SMs x min({self.regs_per_sm} registers // "
                              f"(registers per thread x {self.warp_size} x {TRITON_NUM_WARPS}), "
                              f"{self.smem_per_block} B // the kernel's shared memory), at most M"),
            "triton_kernels": "; ".join(f"{self.seen[k]} (N % 16 {'==' if k[1] else '!='} 0)"
                                        for k in sorted(self.seen)),
        }


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


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

def parse_sweeps(text: str) -> List[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SWEEPS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown sweep {', '.join(bad) or '(none)'}; "
                                         f"choose from {', '.join(SWEEPS)}")
    return [s for s in SWEEPS if s in names]   # always in the canonical order


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, metavar="FILE",
                    help="output JSON (default: docs/results/torch_<gpu>.json, e.g. torch_h100.json)")
    ap.add_argument("--sweeps", type=parse_sweeps, default=list(SWEEPS), metavar="LIST",
                    help=f"comma-separated sweeps to run (default: {','.join(SWEEPS)})")
    ap.add_argument("--no-triton", action="store_true", help="time torch.softmax alone")
    ap.add_argument("--runs", type=int, default=None,
                    help=f"timed launches per point (default: {SHORT_RUNS} where the shape moves at "
                         f"most {SHORT_BYTES >> 20} MiB, else {RUNS}, as softmax_bench)")
    ap.add_argument("--commit", help="commit to record (default: git's HEAD, -dirty if modified)")
    ap.add_argument("--command", help="command to record (default: this command line)")
    args = ap.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if args.runs is not None and args.runs < 1:
        ap.error("--runs must be at least 1")

    try:
        import torch
    except ImportError:
        note("PyTorch is not installed (pip install torch); nothing measured")
        return 2
    if not torch.cuda.is_available():
        note(f"no CUDA GPU visible to PyTorch; nothing measured (exit code {EXIT_NO_GPU} means "
             f"skipped)")
        return EXIT_NO_GPU

    device = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(device)
    l2_bytes = int(getattr(props, "L2_cache_size", 0))
    if not l2_bytes:
        note("this PyTorch does not report the L2 size; flushing 64 MB")
    if not hasattr(torch.cuda, "_sleep"):
        note("this PyTorch has no torch.cuda._sleep; timing without the spin before each launch")

    tri: Optional[TritonSoftmax] = None
    if args.no_triton:
        note("--no-triton: the Triton peer is skipped; timing torch.softmax alone")
    else:
        try:
            tri = TritonSoftmax(torch, device)
        except ImportError as e:
            note(f"triton is not importable ({e}); the Triton peer is skipped, timing "
                 f"torch.softmax alone")
        except Exception as e:   # installed but unusable here
            note(f"triton is not usable here ({type(e).__name__}: {e}); the Triton peer is "
                 f"skipped, timing torch.softmax alone")
    impls = ["memcpy", "torch"] + (["triton"] if tri else [])

    flush = L2Flush(torch, l2_bytes)
    gen = torch.Generator(device="cuda").manual_seed(SEED)

    context: Dict[str, object] = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "tools/torch_softmax_bench.py",
        "gpu_name": props.name,
        "gpu_sm_count": str(props.multi_processor_count),
        "gpu_l2_bytes": str(l2_bytes),
        "driver": "unknown", "driver_cuda": "unknown",
        "runtime_cuda": str(torch.version.cuda),
        **nvidia_smi_facts(),
        "rows": str(ROWS),
        "timed_runs": str(args.runs) if args.runs is not None else f"{SHORT_RUNS} or {RUNS}",
        **({} if args.runs is not None else {"timed_runs_rule": (
            f"{SHORT_RUNS} launches where 2·M·N·4 ≤ {SHORT_BYTES >> 20} MiB, {RUNS} above")}),
        "sweeps": "; ".join(SWEEP_TEXT[s] for s in args.sweeps),
        "implementations": ",".join(impls),
        **{f"lesson:{i}": LESSONS[i] for i in impls},
        "version:torch": torch.__version__,
        "commit": args.commit or pr.git_commit(),
        "command": args.command or shlex.join(["tools/torch_softmax_bench.py", *argv]),
    }
    shapes = sum(len(SWEEPS[s]) for s in args.sweeps)
    say(f"{props.name}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}"
        + (f", Triton {tri.version} (num_warps {TRITON_NUM_WARPS}, {tri.stages} stages, "
           f"{tri.sm_count} SMs)" if tri else ", no Triton")
        + f": {shapes} shapes in sweeps {', '.join(args.sweeps)}; {', '.join(impls)}")

    results: Dict[str, List[Dict[str, object]]] = {impl: [] for impl in impls}
    skipped: List[str] = []
    t_start = time.perf_counter()
    done = 0
    try:
        for sweep in args.sweeps:
            say(f"sweep {SWEEP_TEXT[sweep]}")
            for rows, cols in SWEEPS[sweep]:
                x = torch.randn((rows, cols), device="cuda", dtype=torch.float32, generator=gen)
                x[:, 0] += 20.0   # one planted peak per row, so the softmax is far from uniform
                ref = reference(torch, x)
                check_softmax(torch, "torch", ref, torch.softmax(x, dim=-1), rows, cols)
                y_copy = torch.empty_like(x)
                names = ["memcpy", "torch"]
                fns: List[Callable[[], object]] = [lambda: y_copy.copy_(x),
                                                   lambda: torch.softmax(x, dim=-1)]
                if tri:
                    y_tri = torch.empty_like(x)
                    try:
                        launch = tri.plan(y_tri, x)
                    except TritonSkip as e:
                        results["triton"].append(skipped_entry("triton", sweep, rows, cols, str(e)))
                        skipped.append(f"{sweep} {rows}x{cols}")
                        note(f"triton skipped at M={rows} N={cols}: {e}")
                    else:
                        tri.verified_run(torch, launch, x, ref)
                        names.append("triton")
                        fns.append(tri.launcher(launch, y_tri, x))
                del ref
                times = time_interleaved(torch, fns, flush, runs_for(rows, cols, args.runs), WARMUP)
                copy_ms = times[0][0]
                line = []
                for impl, (med, lo) in zip(names, times):
                    e = entry(impl, sweep, rows, cols, med, lo, copy_ms)
                    results[impl].append(e)
                    line.append(f"{impl} {e['GBps']:7.1f} GB/s" if impl == "memcpy" else
                                f"{impl} {e['GBps']:7.1f} GB/s ({e['ratio_to_memcpy']:.2f})")
                if tri and "triton" not in names:
                    line.append("triton skipped")
                done += 1
                say(f"  [{done:3d}/{shapes}] {sweep:9s} M = {rows:5d} N = {cols:5d}  "
                    + "  ".join(line))
    except CheckFailed as e:
        note(f"check failed: {e}")
        return 1
    except RuntimeError as e:   # CUDA errors (torch raises RuntimeError)
        note(f"{type(e).__name__}: {e}")
        return 1

    if tri:
        context.update(tri.context())
        if skipped:
            note(f"triton was skipped at {len(skipped)} of {shapes} shapes: {', '.join(skipped)}")
    benchmarks = [e for impl in impls for e in results[impl]]
    for i, e in enumerate(benchmarks):
        e["family_index"] = i
    out = args.out or (pr.REPO_ROOT / "docs" / "results" / f"torch_{pr.gpu_slug(props.name)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"context": context, "benchmarks": benchmarks}
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    say(f"{len(benchmarks)} entries in {time.perf_counter() - t_start:.0f} s")
    say(f"wrote      {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
