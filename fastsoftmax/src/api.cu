// SPDX-License-Identifier: MIT
// fastsoftmax: the public entry points (fastsoftmax/softmax.h): the arguments' checks, then the
// dispatch (dispatch.cu for the float32 forward, typed.h for the rest).
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <sstream>

#include "check.h"
#include "dispatch.h"
#include "fastsoftmax/softmax.h"
#include "plan_record.h"
#include "split.h"
#include "typed.h"

namespace fastsoftmax {
namespace detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::ostringstream msg;
  msg << "fastsoftmax: CUDA error " << cudaGetErrorName(code) << " (" << cudaGetErrorString(code)
      << ") in " << call << " at " << file << ":" << line;
  throw Error(Error::Kind::kCuda, msg.str(), code);
}

void throw_invalid(const std::string& what) { throw Error(Error::Kind::kInvalidArgument, what); }

namespace {

struct Arg {
  const char* name;  // as the message names it: "input pointer x", "output pointer dx"
  const char* short_name;
  const void* ptr;
};

// Throws naming the first problem with the arguments; false for an empty matrix (nothing to do).
// `inputs` are read, `output` is written: it may equal an input (in place) but not overlap it
// otherwise, which would let one row's output overwrite another's input. The message is built
// only when there is a problem: a good call allocates nothing here.
template <typename... Parts>
[[noreturn]] void refuse(const char* fn, const Parts&... parts) {
  std::ostringstream msg;
  msg << "fastsoftmax::" << fn << ": ";
  (msg << ... << parts);
  throw_invalid(msg.str());
}

bool check_args(const char* fn, size_t elem, std::initializer_list<Arg> inputs, Arg output,
                int64_t rows, int64_t cols) {
  if (rows < 0 || rows > INT_MAX) refuse(fn, "rows must be in [0, 2^31 - 1] (got ", rows, ")");
  if (cols < 0 || cols > INT_MAX) refuse(fn, "cols must be in [0, 2^31 - 1] (got ", cols, ")");
  if (rows == 0 || cols == 0) return false;
  for (const Arg& a : inputs) {
    if (a.ptr == nullptr) refuse(fn, a.name, " is null");
  }
  if (output.ptr == nullptr) refuse(fn, output.name, " is null");
  for (const Arg& a : inputs) {
    if (reinterpret_cast<uintptr_t>(a.ptr) % elem != 0) {
      refuse(fn, a.name, " is not ", elem, "-byte aligned (", a.ptr, ")");
    }
  }
  if (reinterpret_cast<uintptr_t>(output.ptr) % elem != 0) {
    refuse(fn, output.name, " is not ", elem, "-byte aligned (", output.ptr, ")");
  }
  const uint64_t elements = uint64_t(rows) * uint64_t(cols);  // < 2^62
  const uint64_t bytes = elements > UINT64_MAX / elem ? UINT64_MAX : elements * elem;
  const auto uo = reinterpret_cast<uintptr_t>(output.ptr);
  for (const Arg& a : inputs) {
    const auto ui = reinterpret_cast<uintptr_t>(a.ptr);
    const bool overlap = ui != uo && (ui < uo ? uo - ui < bytes : ui - uo < bytes);
    if (overlap) {
      refuse(fn, a.short_name, " and ", output.short_name, " overlap without being equal (",
             a.short_name, " = ", a.ptr, ", ", output.short_name, " = ", output.ptr, ", ", bytes,
             " bytes each)");
    }
  }
  return true;
}

bool check_forward(const char* fn, size_t elem, const void* x, const void* y, int64_t rows,
                   int64_t cols) {
  return check_args(fn, elem, {{"input pointer x", "x", x}}, {"output pointer y", "y", y}, rows,
                    cols);
}

bool check_backward(const char* fn, size_t elem, const void* y, const void* dy, const void* dx,
                    int64_t rows, int64_t cols) {
  return check_args(fn, elem, {{"input pointer y", "y", y}, {"input pointer dy", "dy", dy}},
                    {"output pointer dx", "dx", dx}, rows, cols);
}

Plan empty_plan() {
  Plan plan;
  plan.path = "empty";
  plan.why = "rows or cols is 0: nothing to launch";
  return plan;  // no device is asked anything
}

// Runs `dispatch` with every launch recorded into the returned plan (plan_record.h).
template <typename F>
Plan record(F dispatch) {
  Plan plan;
  Plan*& slot = recording();
  slot = &plan;
  try {
    dispatch();
  } catch (...) {
    slot = nullptr;
    throw;
  }
  slot = nullptr;
  plan.clusters = clusters_enabled();
  return plan;
}

template <typename T>
void forward_typed(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (!check_forward("softmax", sizeof(T), x, y, rows, cols)) return;
  dispatch_forward_typed(x, y, static_cast<int>(rows), static_cast<int>(cols), stream);
}

template <typename T>
Plan describe_typed(const T* x, const T* y, int64_t rows, int64_t cols) {
  if (!check_forward("describe", sizeof(T), x, y, rows, cols)) return empty_plan();
  // The dispatch only reads through y's address (alignment); it writes nothing while recording.
  return record([&] {
    dispatch_forward_typed(x, const_cast<T*>(y), static_cast<int>(rows), static_cast<int>(cols),
                           nullptr);
  });
}

template <typename T>
void backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (!check_backward("softmax_backward", sizeof(T), y, dy, dx, rows, cols)) return;
  dispatch_backward(y, dy, dx, static_cast<int>(rows), static_cast<int>(cols), stream);
}

template <typename T>
Plan describe_bwd(const T* y, const T* dy, const T* dx, int64_t rows, int64_t cols) {
  if (!check_backward("describe_backward", sizeof(T), y, dy, dx, rows, cols)) {
    return empty_plan();
  }
  return record([&] {
    dispatch_backward(y, dy, const_cast<T*>(dx), static_cast<int>(rows), static_cast<int>(cols),
                      nullptr);
  });
}

}  // namespace
}  // namespace detail

void softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (!detail::check_forward("softmax", sizeof(float), x, y, rows, cols)) return;
  detail::dispatch(x, y, static_cast<int>(rows), static_cast<int>(cols), stream);
}
void softmax(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t rows, int64_t cols,
             cudaStream_t stream) {
  detail::forward_typed(x, y, rows, cols, stream);
}
void softmax(const __half* x, __half* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  detail::forward_typed(x, y, rows, cols, stream);
}

void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  detail::backward(y, dy, dx, rows, cols, stream);
}
void softmax_backward(const __nv_bfloat16* y, const __nv_bfloat16* dy, __nv_bfloat16* dx,
                      int64_t rows, int64_t cols, cudaStream_t stream) {
  detail::backward(y, dy, dx, rows, cols, stream);
}
void softmax_backward(const __half* y, const __half* dy, __half* dx, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
  detail::backward(y, dy, dx, rows, cols, stream);
}

Plan describe(const float* x, const float* y, int64_t rows, int64_t cols) {
  if (!detail::check_forward("describe", sizeof(float), x, y, rows, cols)) {
    return detail::empty_plan();
  }
  // The dispatch only reads through y's address (alignment); it writes nothing while recording.
  return detail::record([&] {
    detail::dispatch(x, const_cast<float*>(y), static_cast<int>(rows), static_cast<int>(cols),
                     nullptr);
  });
}
Plan describe(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t rows, int64_t cols) {
  return detail::describe_typed(x, y, rows, cols);
}
Plan describe(const __half* x, const __half* y, int64_t rows, int64_t cols) {
  return detail::describe_typed(x, y, rows, cols);
}
Plan describe_backward(const float* y, const float* dy, const float* dx, int64_t rows,
                       int64_t cols) {
  return detail::describe_bwd(y, dy, dx, rows, cols);
}
Plan describe_backward(const __nv_bfloat16* y, const __nv_bfloat16* dy, const __nv_bfloat16* dx,
                       int64_t rows, int64_t cols) {
  return detail::describe_bwd(y, dy, dx, rows, cols);
}
Plan describe_backward(const __half* y, const __half* dy, const __half* dx, int64_t rows,
                       int64_t cols) {
  return detail::describe_bwd(y, dy, dx, rows, cols);
}

bool clusters_enabled() { return detail::clusters_usable(); }
void set_clusters_enabled(bool on) { detail::use_clusters(on); }
std::string cluster_report() { return detail::cluster_report(); }

}  // namespace fastsoftmax
