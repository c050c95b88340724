# SPDX-License-Identifier: MIT
"""fastsoftmax for PyTorch: a row-wise softmax at the memory-bandwidth limit, with its backward.

    import fastsoftmax
    y = fastsoftmax.softmax(x)          # x: a CUDA tensor, float32, float16 or bfloat16

is torch.softmax(x, dim=-1) through the C++ library in this repository (fastsoftmax/): forward
and backward kernels, all arithmetic in float32, launched on the current stream. The ops are
registered with torch.library (torch.ops.fastsoftmax.softmax and .softmax_backward, softmax's
autograd in C++), with a fake kernel, so torch.compile(fullgraph=True) traces through them.

Inputs: any shape; the softmax is over the last dimension only. A non-contiguous input is copied
to a contiguous one first (the output is contiguous). An empty tensor gives an empty result. CPU
tensors, other dtypes and other dims raise an error that says which, before anything runs.
"""
from __future__ import annotations

import operator

import torch

from . import _C  # noqa: F401  (registers torch.ops.fastsoftmax.*)

__all__ = ["softmax", "__version__"]
__version__ = "0.1.0"

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# The fake kernels check what the real ones check, so that torch.compile reports it when tracing.
@torch.library.register_fake("fastsoftmax::softmax")
def _softmax_fake(x: torch.Tensor) -> torch.Tensor:
    torch._check(x.device.type == "cuda", lambda: f"fastsoftmax.softmax: x must be a CUDA tensor, "
                 f"got one on {x.device}")
    torch._check(x.dtype in _DTYPES, lambda: "fastsoftmax.softmax: x must be float32, float16 or "
                 f"bfloat16, got {x.dtype}")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("fastsoftmax::softmax_backward")
def _softmax_backward_fake(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    torch._check(y.device.type == "cuda" and y.device == dy.device,
                 lambda: f"fastsoftmax.softmax_backward: y ({y.device}) and dy ({dy.device}) must "
                 "be on one GPU")
    torch._check(y.dtype in _DTYPES and y.dtype == dy.dtype,
                 lambda: f"fastsoftmax.softmax_backward: y ({y.dtype}) and dy ({dy.dtype}) must "
                 "have one dtype, float32, float16 or bfloat16")
    torch._check(y.shape == dy.shape, lambda: "fastsoftmax.softmax_backward: y and dy must have "
                 "one shape")
    return torch.empty_like(y, memory_format=torch.contiguous_format)


def _backward_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _double_backward(ctx, grad):
    # d(dx)/dy and d(dx)/d(dy) of dx = y * (dy - sum(dy * y)), in torch ops (rarely needed).
    y, dy = ctx.saved_tensors
    dot = (dy * y).sum(-1, keepdim=True)
    gdot = (grad * y).sum(-1, keepdim=True)
    grad_y = grad * (dy - dot) - gdot * dy
    grad_dy = y * (grad - gdot)
    return grad_y, grad_dy


# softmax's own autograd is registered in C++ (csrc/ops.cpp). With it and the fast path in
# softmax() below, fastsoftmax.softmax's host time a call at 8x128 went from 2.0 times torch's to
# 1.2-1.4 times, from run to run (H200, tools/torch_op_bench.py).
torch.library.register_autograd("fastsoftmax::softmax_backward", _double_backward,
                                setup_context=_backward_setup)


_softmax_op = torch.ops.fastsoftmax.softmax.default


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) for dim the last dimension, on a CUDA tensor of float32, float16 or
    bfloat16. Differentiable. Raises TypeError or ValueError naming the problem otherwise."""
    # The common call first, in as few Python operations as it takes (host time a call counts at
    # small shapes); anything else goes through the checks below.
    if type(dim) is int and dim == -1 and isinstance(x, torch.Tensor) and x.is_cuda and (
            x.dtype in _DTYPES):
        return _softmax_op(x)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"fastsoftmax.softmax: x must be a torch.Tensor, got {type(x).__name__}")
    if isinstance(dim, bool):
        raise TypeError(f"fastsoftmax.softmax: dim must be an int, got {dim!r}")
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TypeError(f"fastsoftmax.softmax: dim must be an int, got {dim!r}") from None
    last = max(x.dim() - 1, 0)
    if dim not in (-1, last):
        raise ValueError(
            f"fastsoftmax.softmax: only the last dimension is supported (dim=-1 or {last} for a "
            f"{x.dim()}-d tensor), got dim={dim}; move it last with x.movedim({dim}, -1)")
    if x.device.type != "cuda":
        raise ValueError(f"fastsoftmax.softmax: x must be a CUDA tensor, got one on {x.device}")
    if x.dtype not in _DTYPES:
        raise TypeError(
            f"fastsoftmax.softmax: x must be float32, float16 or bfloat16, got {x.dtype}")
    return _softmax_op(x)
