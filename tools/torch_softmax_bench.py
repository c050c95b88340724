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
  python3 tools/plot_results.py docs/results/bench_h200.json --extra docs/results/torch_h200.json

Exit codes: 0 done (also when the Triton peer, or some of its shapes, were skipped); 1 a check
failed (a wrong result, a write out of bounds, a CUDA error); 2 torch missing or bad arguments;
77 no GPU.

The timing, checking and JSON-entry helpers are in tools/torch_timing.py, the Triton peer in
tools/triton_softmax.py.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (provenance helpers)
# Timing, checking and the JSON entries; the Triton peer (each in its own file).
from torch_timing import (RUNS, SHORT_BYTES, SHORT_RUNS, WARMUP, CheckFailed,  # noqa: E402
                          L2Flush, check_softmax, entry, note, nvidia_smi_facts, reference,
                          runs_for, say, skipped_entry, time_interleaved)
from triton_softmax import TRITON_NUM_WARPS, TritonSkip, TritonSoftmax  # noqa: E402

EXIT_NO_GPU = 77
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
                    help="output JSON (default: docs/results/torch_<gpu>.json, e.g. torch_h200.json)")
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
