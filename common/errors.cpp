// SPDX-License-Identifier: MIT
#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "common/cuda_check.h"
#include "common/softmax.h"

namespace softmax {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line) {
  std::ostringstream msg;
  msg << "CUDA error " << cudaGetErrorName(code) << " (" << cudaGetErrorString(code) << ") in "
      << call << " at " << file << ":" << line;
  throw CudaError(code, msg.str());
}

void check_launch_args(const char* step, const float* x, const float* y, int rows, int cols,
                       int max_cols) {
  std::ostringstream msg;
  msg << step << ": ";
  if (x == nullptr) {
    msg << "input pointer x is null";
  } else if (y == nullptr) {
    msg << "output pointer y is null";
  } else if (reinterpret_cast<uintptr_t>(x) % alignof(float) != 0) {
    msg << "input pointer x is not 4-byte aligned (" << static_cast<const void*>(x) << ")";
  } else if (reinterpret_cast<uintptr_t>(y) % alignof(float) != 0) {
    msg << "output pointer y is not 4-byte aligned (" << static_cast<const void*>(y) << ")";
  } else if (rows < 1) {
    msg << "rows must be >= 1 (got " << rows << ")";
  } else if (cols < 1) {
    msg << "cols must be >= 1 (got " << cols << ")";
  } else if (cols > max_cols) {
    msg << "cols = " << cols << " exceeds this step's limit of " << max_cols
        << " on this device";
  } else {
    return;
  }
  throw std::invalid_argument(msg.str());
}

}  // namespace softmax
