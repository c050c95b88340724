// SPDX-License-Identifier: MIT
// One error macro for every CUDA runtime call: a failure throws softmax::CudaError carrying the
// call's text, file and line.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace softmax {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line);

inline void cuda_check(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) throw_cuda_error(code, call, file, line);
}

}  // namespace softmax

#define CUDA_CHECK(call) ::softmax::cuda_check((call), #call, __FILE__, __LINE__)

// After every <<<...>>> launch: a bad configuration is reported here, not at the next sync.
#define CUDA_CHECK_LAUNCH() ::softmax::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
