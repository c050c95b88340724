#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch package (python/) against torch, in float32, bfloat16 and float16, forward and
backward, each beside a device-to-device memcpy of the same bytes, timed as
tools/torch_softmax_bench.py times (tools/torch_timing.py: L2 flushed before every launch,
interleaved rounds, medians).

Implementations, per dtype and direction (label "<impl>", names
"<impl>/<dtype>/<direction>/<sweep>/M:<M>/N:<N>/iterations:1/manual_time"):

  memcpy       a copy moving the same bytes: forward reads and writes M*N elements (2 streams),
               backward reads y and dy and writes dx (3 streams), so its copy is of 1.5*M*N
  torch        torch.softmax(x, -1); backward torch.ops.aten._softmax_backward_data
  fastsoftmax  fastsoftmax.softmax(x); backward torch.ops.fastsoftmax.softmax_backward

Before timing, each shape checks fastsoftmax against torch in float64: forward within one unit
in the last place of the dtype plus 1e-5 relative, backward within that plus the float32 sum of
the row's products (python/tests/test_softmax.py states the same bounds).

Also measured: the host time of one call at a small shape (calls issued back to back, no
synchronisation, the mean over many), which is what a user sees where the kernel is short.

  python3 tools/torch_op_bench.py [--out FILE] [--sweeps grid,irregular,long,few,gpt]
        [--dtypes float32,bfloat16,float16] [--directions forward,backward] [--stride K]
        [--runs R] [--commit C] [--command C]

--stride K takes every K-th point of the grid and irregular sweeps (a quick run). Exit codes: 0
done; 1 a check failed; 2 torch or the package missing; 77 no GPU.
"""
from __future__ import annotations

import argparse
import datetime
import json
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_results as br  # noqa: E402  (git_commit, gpu_slug)
from torch_timing import (WARMUP, CheckFailed, L2Flush, bench_name, nvidia_smi_facts,  # noqa: E402
                          runs_for, say, time_interleaved)

def dump(doc: dict) -> str:
    """The JSON document with one benchmark a line: the full sweeps hold thousands of entries,
    and indented they took 3.3 MB of the repository's tree."""
    lines = ",\n".join(json.dumps(b, separators=(",", ":")) for b in doc["benchmarks"])
    return ('{"context": ' + json.dumps(doc["context"], indent=1) + ',\n"benchmarks": [\n' + lines +
            "\n]}\n")


SWEEPS = {
    "grid": [(4096, 128 * i) for i in range(2, 129)],
    "irregular": [(4096, 97 * k) for k in range(3, 169)],
    "long": [((1 << 27) // n, n) for e in range(14, 21) for n in (1 << e, (1 << e) + 3)],
    "few": [(1, 1 << 20), (8, 1 << 20), (64, 1 << 18), (32, 1 << 14), (128, 4096)],
    # The attention scores of a GPT-2-small-sized model: batch 8, 12 heads, 1024 tokens.
    "gpt": [(8 * 12 * 1024, 1024)],
}
MANTISSA = {"float32": 23, "bfloat16": 7, "float16": 10}


def check(torch, fs, dtype_name, direction, x, dy):
    eps = 2.0 ** -MANTISSA[dtype_name] + 1e-5
    cols = x.shape[-1]
    if direction == "forward":
        y = fs.softmax(x).double()
        ref = torch.softmax(x.double(), -1)
        bound = eps * ref.abs() + 1e-7
    else:
        y0 = fs.softmax(x)
        got = torch.ops.fastsoftmax.softmax_backward(y0, dy).double()
        yd, gd = y0.double(), dy.double()
        ref = yd * (gd - (gd * yd).sum(-1, keepdim=True))
        bound = eps * ref.abs() + 1e-7 + 2.0 ** -24 * (64 + cols / 64) * yd * (
            gd.abs() + (gd * yd).abs().sum(-1, keepdim=True))
        y = got
    excess = ((y - ref).abs() - bound).max().item()
    if not excess <= 0:
        raise CheckFailed(f"fastsoftmax {dtype_name} {direction} at {tuple(x.shape)} is wrong: "
                          f"worst excess over the bound {excess:.3g}")


def host_overhead(torch, fs, calls=2000):
    """Mean host microseconds a call, issued back to back at 8x128 bfloat16 (GPU time ~2 us)."""
    x = torch.randn(8, 128, device="cuda", dtype=torch.bfloat16)
    out = {}
    def inference(fn):
        def run():
            with torch.inference_mode():  # no Autograd dispatch key: the op's kernel alone
                return fn()
        return run

    # Under inference_mode the dispatcher skips the op's autograd (registered in C++): the
    # difference between fastsoftmax_op and its inference_mode line estimates what autograd costs
    # a call, though these lines move by several microseconds from run to run on the H200.
    for name, fn in (("torch", lambda: torch.softmax(x, -1)), ("fastsoftmax", lambda: fs.softmax(x)),
                     ("fastsoftmax_op", lambda: torch.ops.fastsoftmax.softmax(x)),
                     ("torch_inference_mode", inference(lambda: torch.softmax(x, -1))),
                     ("fastsoftmax_op_inference_mode",
                      inference(lambda: torch.ops.fastsoftmax.softmax(x)))):
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        best = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best.append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
        out[name] = statistics.median(best)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out")
    p.add_argument("--sweeps", default="grid,irregular,long,few,gpt")
    p.add_argument("--dtypes", default="float32,bfloat16,float16")
    p.add_argument("--directions", default="forward,backward")
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--runs", type=int)
    p.add_argument("--commit")
    p.add_argument("--command")
    args = p.parse_args(argv)
    try:
        import torch
        import fastsoftmax as fs
    except ImportError as e:
        print(f"torch_op_bench.py: {e} (pip install --no-build-isolation ./python)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_op_bench.py: no CUDA GPU visible to torch", file=sys.stderr)
        return 77
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 64 << 20)
    flush = L2Flush(torch, l2)
    gpu = torch.cuda.get_device_name(0)
    out = Path(args.out or br.REPO_ROOT / "docs" / "results" / f"torch_op_{br.gpu_slug(gpu)}.json")
    dtypes = {n: getattr(torch, n) for n in args.dtypes.split(",")}
    entries = []
    doc = {"context": {}, "benchmarks": entries}

    def save(overhead=None):
        doc["context"] = {
            "gpu_name": gpu, **nvidia_smi_facts(), "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "commit": args.commit or br.git_commit(),
            "command": args.command or shlex.join(["tools/torch_op_bench.py", *(argv or sys.argv[1:])]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
        if overhead:
            doc["context"]["host_us_per_call_8x128_bf16"] = overhead
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(doc))

    for sweep in args.sweeps.split(","):
        shapes = SWEEPS[sweep]
        if sweep in ("grid", "irregular"):
            shapes = shapes[::args.stride]
        for dname, dtype in dtypes.items():
            size = torch.tensor([], dtype=dtype).element_size()
            for direction in args.directions.split(","):
                streams = 2 if direction == "forward" else 3
                for rows, cols in shapes:
                    torch.manual_seed(rows * 131 + cols)
                    x = (torch.randn(rows, cols, device="cuda") * 3).to(dtype)
                    dy = torch.randn(rows, cols, device="cuda").to(dtype)
                    check(torch, fs, dname, direction, x, dy)
                    n_copy = rows * cols * streams // 2
                    src = torch.empty(n_copy, device="cuda", dtype=dtype)
                    dst = torch.empty_like(src)
                    if direction == "forward":
                        fns = [lambda: dst.copy_(src), lambda: torch.softmax(x, -1),
                               lambda: fs.softmax(x)]
                    else:
                        y = torch.softmax(x, -1)
                        fns = [lambda: dst.copy_(src),
                               lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, dtype),
                               lambda: torch.ops.fastsoftmax.softmax_backward(y, dy)]
                    times = time_interleaved(torch, fns, flush, runs_for(rows, cols, args.runs),
                                             WARMUP)
                    nbytes = streams * rows * cols * size
                    memcpy_ms = times[0][0]
                    for impl, (med, low) in zip(("memcpy", "torch", "fastsoftmax"), times):
                        name = bench_name(f"{impl}/{dname}/{direction}", sweep, rows, cols)
                        entries.append({
                            "name": name, "run_name": name, "run_type": "iteration",
                            "iterations": 1, "real_time": med * 1e3, "time_unit": "us",
                            "label": impl, "dtype": dname, "direction": direction,
                            "sweep": sweep, "M": rows, "N": cols, "model_bytes": nbytes,
                            "GBps": nbytes / (med * 1e-3) / 1e9, "median_us": med * 1e3,
                            "min_us": low * 1e3, "ratio_to_memcpy": memcpy_ms / med,
                        })
                    say(f"{sweep:9s} {dname:8s} {direction:8s} {rows}x{cols}: fastsoftmax "
                        f"{memcpy_ms / times[2][0]:.3f} torch {memcpy_ms / times[1][0]:.3f} of memcpy")
        save()
    overhead = host_overhead(torch, fs)
    save(overhead)
    say("host time a call (8x128 bfloat16, back to back): " +
        ", ".join(f"{k} {v:.1f} us" for k, v in overhead.items()))
    say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as e:
        print(f"torch_op_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
