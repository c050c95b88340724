# SPDX-License-Identifier: MIT
"""The Triton peer of torch_softmax_bench.py: the kernel of Triton's fused-softmax tutorial,
written from its description (see torch_softmax_bench.py), with the tutorial's host side (the
program count from the compiled kernel's registers and shared memory). triton is imported only
when the peer is built.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

from torch_timing import CheckFailed, check_softmax, say

# Triton peer settings, as the tutorial chooses them.
TRITON_NUM_WARPS = 8
TRITON_MAX_BLOCK = 65536
TRITON_BIG_SMEM = 200_000      # more shared memory per block than this: 4 stages, else 2
GUARD = 1024                   # float elements of guard zone either side of triton's output
GUARD_VALUE = 12345.0


class TritonSkip(Exception):
    """A shape the Triton peer cannot run (block too large, no compile): skipped, not failed."""


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
