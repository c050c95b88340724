// SPDX-License-Identifier: MIT
// The library's error checks: every CUDA runtime call, and every kernel launch, turns a failure
// into fastsoftmax::Error (kind kCuda) naming the call, the file and the line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "fastsoftmax/softmax.h"

namespace fastsoftmax::detail {

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);
[[noreturn]] void throw_invalid(const std::string& what);

inline void cuda_check(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) throw_cuda_error(code, call, file, line);
}

}  // namespace fastsoftmax::detail

#define FS_CHECK(call) ::fastsoftmax::detail::cuda_check((call), #call, __FILE__, __LINE__)

// After every <<<...>>> launch: a bad configuration is reported here, not at the next sync.
#define FS_CHECK_LAUNCH() \
  ::fastsoftmax::detail::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
