// SPDX-License-Identifier: MIT
// The PyTorch ops over the library (fastsoftmax/include/fastsoftmax/softmax.h):
//   fastsoftmax::softmax(Tensor x) -> Tensor                  softmax over the last dimension
//   fastsoftmax::softmax_backward(Tensor y, Tensor dy) -> Tensor   dx = y * (dy - sum(dy * y))
// CUDA tensors of float32, float16 or bfloat16, launched on torch's current stream under a device
// guard. Autograd of `softmax` is registered here, in C++ (a Python registration adds several
// microseconds to every call); the Python package (fastsoftmax/__init__.py) adds the fake kernels
// for torch.compile, the double backward and the checks of `dim`.
#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cstdint>

#include "fastsoftmax/softmax.h"

namespace {

// The library takes at most 2^31 - 1 rows a call; a larger matrix goes in slices of 2^30 rows.
constexpr int64_t kRowsPerCall = int64_t(1) << 30;

void check_tensor(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.is_cuda(), "fastsoftmax.", op, ": ", name, " must be a CUDA tensor, got one on ",
              t.device());
  const auto type = t.scalar_type();
  TORCH_CHECK(type == at::kFloat || type == at::kHalf || type == at::kBFloat16, "fastsoftmax.",
              op, ": ", name, " must be float32, float16 or bfloat16, got ", type);
}

// Calls f(offset, rows) over slices of at most kRowsPerCall rows; turns the library's errors
// into torch errors that keep its message.
template <typename F>
void over_rows(int64_t rows, int64_t cols, F f) {
  try {
    for (int64_t r = 0; r < rows; r += kRowsPerCall) {
      f(r * cols, std::min(kRowsPerCall, rows - r));
    }
  } catch (const fastsoftmax::Error& e) {
    // A refused argument is a ValueError in Python; a CUDA failure a RuntimeError.
    TORCH_CHECK_VALUE(e.kind() != fastsoftmax::Error::Kind::kInvalidArgument, e.what());
    TORCH_CHECK(false, e.what());
  }
}

at::Tensor softmax_forward(const at::Tensor& x_in) {
  check_tensor(x_in, "softmax", "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (x.numel() == 0) return y;
  const int64_t cols = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = x.numel() / cols;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(x.device().index());
  over_rows(rows, cols, [&](int64_t at, int64_t n) {
    switch (x.scalar_type()) {
      case at::kFloat:
        fastsoftmax::softmax(x.data_ptr<float>() + at, y.data_ptr<float>() + at, n, cols, stream);
        break;
      case at::kHalf:
        fastsoftmax::softmax(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()) + at,
                             reinterpret_cast<__half*>(y.data_ptr<at::Half>()) + at, n, cols,
                             stream);
        break;
      default:
        fastsoftmax::softmax(
            reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()) + at,
            reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()) + at, n, cols, stream);
    }
  });
  return y;
}

at::Tensor softmax_backward(const at::Tensor& y_in, const at::Tensor& dy_in) {
  check_tensor(y_in, "softmax_backward", "y");
  check_tensor(dy_in, "softmax_backward", "dy");
  TORCH_CHECK(y_in.device() == dy_in.device(), "fastsoftmax.softmax_backward: y is on ",
              y_in.device(), " and dy on ", dy_in.device(), "; both must be on the same GPU");
  TORCH_CHECK(y_in.scalar_type() == dy_in.scalar_type(), "fastsoftmax.softmax_backward: y is ",
              y_in.scalar_type(), " and dy ", dy_in.scalar_type(), "; both must have one dtype");
  TORCH_CHECK(y_in.sizes() == dy_in.sizes(), "fastsoftmax.softmax_backward: y has shape ",
              y_in.sizes(), " and dy ", dy_in.sizes(), "; they must be equal");
  const c10::cuda::CUDAGuard guard(y_in.device());
  const at::Tensor y = y_in.contiguous(), dy = dy_in.contiguous();
  at::Tensor dx = at::empty_like(y, at::MemoryFormat::Contiguous);
  if (y.numel() == 0) return dx;
  const int64_t cols = y.dim() == 0 ? 1 : y.size(-1);
  const int64_t rows = y.numel() / cols;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(y.device().index());
  over_rows(rows, cols, [&](int64_t at, int64_t n) {
    switch (y.scalar_type()) {
      case at::kFloat:
        fastsoftmax::softmax_backward(y.data_ptr<float>() + at, dy.data_ptr<float>() + at,
                                      dx.data_ptr<float>() + at, n, cols, stream);
        break;
      case at::kHalf:
        fastsoftmax::softmax_backward(
            reinterpret_cast<const __half*>(y.data_ptr<at::Half>()) + at,
            reinterpret_cast<const __half*>(dy.data_ptr<at::Half>()) + at,
            reinterpret_cast<__half*>(dx.data_ptr<at::Half>()) + at, n, cols, stream);
        break;
      default:
        fastsoftmax::softmax_backward(
            reinterpret_cast<const __nv_bfloat16*>(y.data_ptr<at::BFloat16>()) + at,
            reinterpret_cast<const __nv_bfloat16*>(dy.data_ptr<at::BFloat16>()) + at,
            reinterpret_cast<__nv_bfloat16*>(dx.data_ptr<at::BFloat16>()) + at, n, cols, stream);
    }
  });
  return dx;
}

// softmax's autograd: saves y, and its backward is the softmax_backward op, called through the
// dispatcher so that a double backward records it (its autograd is the Python package's).
class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("fastsoftmax::softmax", "")
                               .typed<at::Tensor(const at::Tensor&)>();
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor y = op.call(x);
    ctx->save_for_backward({y});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("fastsoftmax::softmax_backward", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    if (!grads[0].defined()) return {at::Tensor()};
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    return {op.call(saved[0], grads[0])};
  }
};

at::Tensor softmax_autograd(const at::Tensor& x) { return SoftmaxFunction::apply(x); }

// CPU tensors reach these, which say what is wrong (rather than the dispatcher's "could not run
// ... with arguments from the 'CPU' backend").
at::Tensor forward_elsewhere(const at::Tensor& x) {
  check_tensor(x, "softmax", "x");
  return x;  // not reached
}
at::Tensor backward_elsewhere(const at::Tensor& y, const at::Tensor& dy) {
  check_tensor(y, "softmax_backward", "y");
  check_tensor(dy, "softmax_backward", "dy");
  return y;  // not reached: y and dy cannot both be CUDA tensors here
}

}  // namespace

TORCH_LIBRARY(fastsoftmax, m) {
  m.def("softmax(Tensor x) -> Tensor");
  m.def("softmax_backward(Tensor y, Tensor dy) -> Tensor");
}

TORCH_LIBRARY_IMPL(fastsoftmax, CUDA, m) {
  m.impl("softmax", &softmax_forward);
  m.impl("softmax_backward", &softmax_backward);
}

TORCH_LIBRARY_IMPL(fastsoftmax, Autograd, m) { m.impl("softmax", &softmax_autograd); }

TORCH_LIBRARY_IMPL(fastsoftmax, CPU, m) {
  m.impl("softmax", &forward_elsewhere);
  m.impl("softmax_backward", &backward_elsewhere);
}

// The module Python imports (fastsoftmax._C): empty; importing it runs the registrations above.
extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module);
}
