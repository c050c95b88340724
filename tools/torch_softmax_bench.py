#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch.softmax(x, dim=-1) on float32, timed the way build/bench/softmax_bench times the steps.

M = 4096 rows, N = 128*i for i = 2..128. Method, as in common/timer.cu: 3 warm-up launches; then
before each of 30 timed launches, L2 is flushed (a write of max(2 x L2, 64 MB) followed by a read
of it); CUDA events around the launch alone; the median and the minimum. A device-to-device copy
of the same bytes (y.copy_(x)) is timed the same way beside it. Effective bandwidth = 2*M*N*4 bytes
/ median time.

The output is the benchmark's JSON schema (a Google Benchmark JSON: context, and entries named
"torch/N:<N>/iterations:1/manual_time" with label "torch" and counters M, N, GBps, memcpy_GBps,
ratio_to_memcpy, median_us, min_us, model_bytes), so tools/plot_results.py can overlay it:

  python3 tools/torch_softmax_bench.py [--out FILE] [--commit C] [--command C]
  python3 tools/plot_results.py docs/results/bench_h100.json --extra docs/results/torch_h100.json

Exit codes: 0 done; 1 a check failed; 2 torch missing; 77 no GPU.
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
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plot_results as pr  # noqa: E402  (provenance helpers)

ROWS = 4096
COLS = [128 * i for i in range(2, 129)]
RUNS = 30
WARMUP = 3
EXIT_NO_GPU = 77


def effective_gbps(rows: int, cols: int, ms: float) -> float:
    """Same definition as softmax::effective_gbps: one read and one write of every element."""
    return 2.0 * rows * cols * 4 / (ms * 1e-3) / 1e9


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


def time_op(torch, fn: Callable[[], object], flush: L2Flush, runs: int, warmup: int) -> Tuple[float, float]:
    """(median ms, min ms) of `fn` over `runs` launches, L2 flushed before each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    ms: List[float] = []
    for _ in range(runs):
        flush()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms.append(start.elapsed_time(stop))
    return statistics.median(ms), min(ms)


def check_softmax(torch, x, y, cols: int) -> None:
    """A sanity check that the timed call computes a softmax (not the repository's strict
    verification; this is torch's own kernel): against float64, and row sums."""
    ref = torch.softmax(x.double(), dim=-1)
    err = (y.double() - ref).abs().max().item()
    row = (y.double().sum(dim=-1) - 1).abs().max().item()
    if not (err <= 1e-5 and row <= 1e-4):
        raise RuntimeError(f"torch.softmax at N={cols}: max abs err {err:.3g}, max |row sum - 1| {row:.3g}")


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


def entry(impl: str, index: int, rows: int, cols: int, median_ms: float, min_ms: float,
          memcpy_ms: float) -> Dict[str, object]:
    """One Google-Benchmark-like entry, counters as softmax_bench writes them."""
    name = f"{impl}/N:{cols}/iterations:1/manual_time"
    gbps, memcpy_gbps = effective_gbps(rows, cols, median_ms), effective_gbps(rows, cols, memcpy_ms)
    return {
        "name": name, "family_index": index, "per_family_instance_index": 0, "run_name": name,
        "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1,
        "iterations": 1, "real_time": median_ms * 1e3, "cpu_time": 0.0, "time_unit": "us",
        "GBps": gbps, "M": float(rows), "N": float(cols), "bytes_per_second": gbps * 1e9,
        "median_us": median_ms * 1e3, "memcpy_GBps": memcpy_gbps, "min_us": min_ms * 1e3,
        "model_bytes": 2.0 * rows * cols * 4, "ratio_to_memcpy": gbps / memcpy_gbps, "label": impl,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, metavar="FILE",
                    help="output JSON (default: docs/results/torch_<gpu>.json, e.g. torch_h100.json)")
    ap.add_argument("--runs", type=int, default=RUNS, help=f"timed launches per point (default {RUNS})")
    ap.add_argument("--commit", help="commit to record (default: git's HEAD, -dirty if modified)")
    ap.add_argument("--command", help="command to record (default: this command line)")
    args = ap.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)

    try:
        import torch
    except ImportError:
        print("torch_softmax_bench.py: PyTorch is not installed (pip install torch); nothing measured",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_softmax_bench.py: no CUDA GPU visible to PyTorch; nothing measured (exit code "
              f"{EXIT_NO_GPU} means skipped)", file=sys.stderr)
        return EXIT_NO_GPU

    props = torch.cuda.get_device_properties(0)
    l2_bytes = int(getattr(props, "L2_cache_size", 0))
    if not l2_bytes:
        print("note: this PyTorch does not report the L2 size; flushing 64 MB", file=sys.stderr)
    flush = L2Flush(torch, l2_bytes)
    gen = torch.Generator(device="cuda").manual_seed(20240607)

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
        "timed_runs": str(args.runs),
        "implementations": "memcpy,torch",
        "lesson:torch": "torch.softmax(x, dim=-1): PyTorch's own softmax kernel",
        "version:torch": torch.__version__,
        "commit": args.commit or pr.git_commit(),
        "command": args.command or shlex.join(["tools/torch_softmax_bench.py", *argv]),
    }
    print(f"{props.name}, PyTorch {torch.__version__}, CUDA {torch.version.cuda}: "
          f"M = {ROWS}, N = {COLS[0]}..{COLS[-1]}")

    memcpy_entries, torch_entries = [], []
    try:
        for i, cols in enumerate(COLS):
            x = torch.randn((ROWS, cols), device="cuda", dtype=torch.float32, generator=gen)
            x[:, 0] += 20.0   # one planted peak per row, so the softmax is far from uniform
            y = torch.empty_like(x)
            check_softmax(torch, x, torch.softmax(x, dim=-1), cols)
            copy_ms = time_op(torch, lambda: y.copy_(x), flush, args.runs, WARMUP)
            soft_ms = time_op(torch, lambda: torch.softmax(x, dim=-1), flush, args.runs, WARMUP)
            memcpy_entries.append(entry("memcpy", i, ROWS, cols, *copy_ms, copy_ms[0]))
            torch_entries.append(entry("torch", len(COLS) + i, ROWS, cols, *soft_ms, copy_ms[0]))
            t = torch_entries[-1]
            print(f"  N = {cols:5d}  torch {t['GBps']:7.1f} GB/s  memcpy {t['memcpy_GBps']:7.1f} GB/s  "
                  f"ratio {t['ratio_to_memcpy']:.2f}")
            del x, y
    except RuntimeError as e:
        print(f"torch_softmax_bench.py: {e}", file=sys.stderr)
        return 1

    out = args.out or (pr.REPO_ROOT / "docs" / "results" / f"torch_{pr.gpu_slug(props.name)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"context": context, "benchmarks": memcpy_entries + torch_entries}
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote      {os.path.relpath(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
