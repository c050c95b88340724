// SPDX-License-Identifier: MIT
// fastsoftmax: the public entry points (fastsoftmax/softmax.h): the arguments' checks, then the
// dispatch.
#include <climits>
#include <cstdint>
#include <sstream>

#include "check.h"
#include "dispatch.h"
#include "fastsoftmax/softmax.h"
#include "plan_record.h"
#include "split.h"

namespace fastsoftmax {
namespace detail {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::ostringstream msg;
  msg << "fastsoftmax: CUDA error " << cudaGetErrorName(code) << " (" << cudaGetErrorString(code)
      << ") in " << call << " at " << file << ":" << line;
  throw Error(Error::Kind::kCuda, msg.str(), code);
}

void throw_invalid(const std::string& what) {
  throw Error(Error::Kind::kInvalidArgument, what);
}

namespace {

// Throws naming the first problem with the arguments; false for an empty matrix (nothing to do).
bool check_args(const char* fn, const void* x, const void* y, int64_t rows, int64_t cols) {
  std::ostringstream msg;
  msg << "fastsoftmax::" << fn << ": ";
  const auto ux = reinterpret_cast<uintptr_t>(x), uy = reinterpret_cast<uintptr_t>(y);
  if (rows < 0 || rows > INT_MAX) {
    msg << "rows must be in [0, 2^31 - 1] (got " << rows << ")";
  } else if (cols < 0 || cols > INT_MAX) {
    msg << "cols must be in [0, 2^31 - 1] (got " << cols << ")";
  } else if (rows == 0 || cols == 0) {
    return false;
  } else if (x == nullptr) {
    msg << "input pointer x is null";
  } else if (y == nullptr) {
    msg << "output pointer y is null";
  } else if (ux % alignof(float) != 0) {
    msg << "input pointer x is not 4-byte aligned (" << x << ")";
  } else if (uy % alignof(float) != 0) {
    msg << "output pointer y is not 4-byte aligned (" << y << ")";
  } else {
    // x == y is in place; any other overlap would let one row's output overwrite another's input.
    const uint64_t elements = uint64_t(rows) * uint64_t(cols);  // < 2^62
    const uint64_t bytes = elements > UINT64_MAX / sizeof(float) ? UINT64_MAX
                                                                  : elements * sizeof(float);
    const bool overlap = ux != uy && (ux < uy ? uy - ux < bytes : ux - uy < bytes);
    if (!overlap) return true;
    msg << "x and y overlap without being equal (x = " << x << ", y = " << y << ", " << bytes
        << " bytes each)";
  }
  throw_invalid(msg.str());
}

}  // namespace
}  // namespace detail

void softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (!detail::check_args("softmax", x, y, rows, cols)) return;
  detail::dispatch(x, y, static_cast<int>(rows), static_cast<int>(cols), stream);
}

Plan describe(const float* x, const float* y, int64_t rows, int64_t cols) {
  Plan plan;
  if (!detail::check_args("describe", x, y, rows, cols)) {
    plan.path = "empty";
    plan.why = "rows or cols is 0: nothing to launch";
    return plan;  // no device is asked anything

  }
  // The dispatch only reads through y's address (alignment); it writes nothing while recording.
  Plan*& slot = detail::recording();
  slot = &plan;
  try {
    detail::dispatch(x, const_cast<float*>(y), static_cast<int>(rows), static_cast<int>(cols),
                     nullptr);
  } catch (...) {
    slot = nullptr;
    throw;
  }
  slot = nullptr;
  plan.clusters = clusters_enabled();
  return plan;
}

bool clusters_enabled() { return detail::clusters_usable(); }
void set_clusters_enabled(bool on) { detail::use_clusters(on); }
std::string cluster_report() { return detail::cluster_report(); }

}  // namespace fastsoftmax
