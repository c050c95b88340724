# SPDX-License-Identifier: MIT
"""fastsoftmax's PyTorch op against torch, forward and backward, in every dtype; torch.compile;
bad inputs. GPU tests are skipped, with the reason, without a CUDA GPU visible to torch."""
import pytest
import torch

import fastsoftmax

gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                         reason="no CUDA GPU visible to torch (torch.cuda.is_available() is False)")

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# Per dtype: one unit in the last place near 1 (relative), and an absolute term for values near 0.
EPS = {torch.float32: 2.0 ** -23, torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}
TINY = {torch.float32: 1e-8, torch.bfloat16: 1e-30, torch.float16: 2.0 ** -24}
SHAPES = [
    (1, 1), (7, 1), (5, 3), (33, 1000), (4, 2049), (257, 4097), (3, 5, 77),  # odd N, N = 1, 3-D
    (2, 65537), (1, 70000), (2, 1_000_003), (1, 1 << 20),  # rows past 64K and 1M elements
    (2, 4096), (8, 16384),  # few rows
    (4096, 128), (10000, 61),  # many short rows
]


def forward_tolerance(dtype):
    # The float32 result within about 1e-5 relative, then one rounding to the dtype.
    return dict(rtol=EPS[dtype] + 1e-5, atol=TINY[dtype] + 1e-8)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_matches_torch(shape, dtype):
    torch.manual_seed(0)
    x = (torch.randn(shape, device="cuda") * 3).to(dtype)
    y = fastsoftmax.softmax(x)
    ref = torch.softmax(x.double(), dim=-1)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y.double(), ref, **forward_tolerance(dtype))
    sums = y.double().sum(-1)
    assert (sums - 1).abs().max().item() <= EPS[dtype] + shape[-1] * TINY[dtype] + 1e-5


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_backward_matches_torch(shape, dtype):
    torch.manual_seed(1)
    x = (torch.randn(shape, device="cuda") * 3).to(dtype).requires_grad_()
    g = torch.randn(shape, device="cuda").to(dtype)
    fastsoftmax.softmax(x).backward(g)
    # The reference from the same y and dy the kernel saw: dx = y * (dy - sum(dy * y)).
    y = fastsoftmax.softmax(x.detach()).double()
    gd = g.double()
    ref = y * (gd - (gd * y).sum(-1, keepdim=True))
    # One rounding to the dtype, plus the float32 sum of the row's products.
    dot_abs = (gd * y).abs().sum(-1, keepdim=True)
    bound = EPS[dtype] * ref.abs() + TINY[dtype] + 2.0 ** -24 * (64 + shape[-1] / 64) * y * (
        gd.abs() + dot_abs)
    err = (x.grad.double() - ref).abs()
    assert x.grad.dtype == dtype
    assert (err <= bound).all(), f"worst excess {(err - bound).max().item():.3g}"


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradient_agrees_with_torch_autograd(dtype):
    torch.manual_seed(2)
    x = (torch.randn(64, 3000, device="cuda")).to(dtype)
    g = torch.randn_like(x)
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    fastsoftmax.softmax(a).backward(g)
    torch.softmax(b.float(), dim=-1).backward(g.float())
    scale = b.grad.abs().max().item()
    torch.testing.assert_close(a.grad.float(), b.grad.float(), rtol=4 * EPS[dtype] + 1e-5,
                               atol=4 * EPS[dtype] * scale + 1e-7)


@gpu
def test_empty_and_non_contiguous():
    for shape in [(0, 10), (10, 0), (0,), (2, 0, 3)]:
        x = torch.empty(shape, device="cuda", dtype=torch.bfloat16)
        y = fastsoftmax.softmax(x)
        assert y.shape == x.shape and y.numel() == 0
    x = torch.randn(300, 500, device="cuda")
    y = fastsoftmax.softmax(x.t())  # documented: copied to a contiguous tensor first
    torch.testing.assert_close(y, torch.softmax(x.t(), dim=-1), rtol=1e-5, atol=1e-8)
    assert y.is_contiguous()


@gpu
def test_zero_dim_and_double_backward():
    x = torch.tensor(1.5, device="cuda")
    assert fastsoftmax.softmax(x).item() == 1.0  # as torch.softmax of a 0-d tensor
    torch.manual_seed(3)
    x = torch.randn(8, 100, device="cuda", requires_grad=True)
    g = torch.randn(8, 100, device="cuda")
    # Second derivatives through the backward op's own autograd, against torch's.
    ours = torch.autograd.grad(fastsoftmax.softmax(x), x, g, create_graph=True)[0]
    theirs = torch.autograd.grad(torch.softmax(x, -1), x, g, create_graph=True)[0]
    v = torch.randn_like(x)
    torch.testing.assert_close(torch.autograd.grad(ours, x, v)[0],
                               torch.autograd.grad(theirs, x, v)[0], rtol=1e-4, atol=1e-6)


@gpu
def test_current_stream_and_in_graph_use():
    x = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = fastsoftmax.softmax(x)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(y.double(), torch.softmax(x.double(), -1),
                               **forward_tolerance(torch.bfloat16))


@gpu
def test_more_rows_than_one_library_call():
    # 2^31 + 5 rows of one element: the op splits them over calls of at most 2^30 rows.
    rows = (1 << 31) + 5
    x = torch.full((rows, 1), -3.0, device="cuda", dtype=torch.bfloat16)
    y = fastsoftmax.softmax(x)
    assert bool((y == 1).all())
    del x, y
    torch.cuda.empty_cache()


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_compile_fullgraph(dtype):
    def attention_probs(q, k):
        return fastsoftmax.softmax(q @ k.transpose(-1, -2) * 0.125)

    q = torch.randn(2, 4, 128, 64, device="cuda", dtype=dtype)
    k = torch.randn(2, 4, 128, 64, device="cuda", dtype=dtype)
    compiled = torch.compile(attention_probs, fullgraph=True)
    torch.testing.assert_close(compiled(q, k), attention_probs(q, k))
    qg = q.clone().requires_grad_()
    compiled(qg, k).sum().backward()
    assert qg.grad is not None and torch.isfinite(qg.grad.float()).all()


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_opcheck(dtype):
    x = torch.randn(16, 300, device="cuda", dtype=dtype, requires_grad=True)
    torch.library.opcheck(torch.ops.fastsoftmax.softmax.default, (x,))
    y = torch.softmax(x.detach(), -1)
    torch.library.opcheck(torch.ops.fastsoftmax.softmax_backward.default, (y, torch.randn_like(y)))


# Bad input: an error naming the problem, nothing returned.
def test_refuses_cpu_tensor():
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        fastsoftmax.softmax(torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="x must be a CUDA tensor"):
        torch.ops.fastsoftmax.softmax(torch.randn(3, 4))


def test_refuses_other_dims_and_non_tensors():
    with pytest.raises(ValueError, match="only the last dimension"):
        fastsoftmax.softmax(torch.randn(3, 4), dim=0)
    with pytest.raises(TypeError, match="dim must be an int"):
        fastsoftmax.softmax(torch.randn(3, 4), dim=1.0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fastsoftmax.softmax([1.0, 2.0])


@gpu
def test_refuses_integer_dtype_and_mixed_devices():
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        fastsoftmax.softmax(torch.ones(3, 4, device="cuda", dtype=torch.int32))
    y = torch.softmax(torch.randn(3, 4, device="cuda"), -1)
    with pytest.raises(RuntimeError, match="dy must be a CUDA tensor"):
        torch.ops.fastsoftmax.softmax_backward(y, torch.randn(3, 4))
    with pytest.raises(RuntimeError, match="must have one dtype"):
        torch.ops.fastsoftmax.softmax_backward(y, y.half())


def test_fake_kernel_gives_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(5, 7, 9, device="cuda", dtype=torch.bfloat16)
        y = fastsoftmax.softmax(x)
        assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
