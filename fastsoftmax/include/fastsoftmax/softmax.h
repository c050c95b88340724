// SPDX-License-Identifier: MIT
// fastsoftmax: a row-wise softmax at the memory-bandwidth limit, for any row length.
//
//   #include <fastsoftmax/softmax.h>
//   fastsoftmax::softmax(x, y, rows, cols, stream);   // y[r][c] = exp(x[r][c]) / sum_c' exp(x[r][c'])
//   fastsoftmax::softmax_backward(y, dy, dx, rows, cols, stream);  // dx = y * (dy - sum(dy * y))
//
// float32, bfloat16 (__nv_bfloat16) and float16 (__half): input and output in the same dtype,
// all arithmetic in float32.
// The call picks one of several kernels by the shape, the pointers' alignment and the GPU (which
// path takes which shape, and why: docs/library.md). `describe` names the path a call would take.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fastsoftmax/version.h"

namespace fastsoftmax {

// Everything the library throws. kind() tells an unusable argument (nothing was launched or
// written) from a failure the CUDA runtime reported (cuda_error() holds its code).
class Error : public std::runtime_error {
 public:
  enum class Kind { kInvalidArgument, kCuda };
  Error(Kind kind, const std::string& what, cudaError_t cuda_error = cudaSuccess)
      : std::runtime_error(what), kind_(kind), cuda_error_(cuda_error) {}
  Kind kind() const noexcept { return kind_; }
  cudaError_t cuda_error() const noexcept { return cuda_error_; }

 private:
  Kind kind_;
  cudaError_t cuda_error_;
};

// The softmax of every row of a row-major rows x cols float32 matrix, over its cols elements:
// y[r][c] = exp(x[r][c] - m_r) / sum_c' exp(x[r][c'] - m_r), m_r the row's maximum, computed in
// float32 with the GPU's fast exp2 and reciprocal (relative error within about 1e-5).
//
// Contract:
//   - shapes: 0 <= rows <= 2^31 - 1 and 0 <= cols <= 2^31 - 1. rows == 0 or cols == 0 is an
//     empty matrix: nothing is launched or written, and x and y may be null. Any cols >= 1 runs;
//     rows longer than the GPU can hold on chip are read twice (docs/library.md, "Fallbacks").
//   - pointers: device memory (or managed memory) on the current device, 4-byte aligned. Any
//     other alignment is fine, and any row length: rows need not start on 16 bytes.
//   - in place: x == y is allowed. Otherwise the two ranges must not overlap.
//   - bad arguments (a negative or too large dimension, a null or misaligned pointer, partly
//     overlapping ranges) throw Error of kind kInvalidArgument naming the problem, before
//     anything is launched or written.
//   - asynchronous on `stream`, like a kernel launch. A failed launch throws Error of kind kCuda;
//     a fault inside a kernel shows at the next synchronisation, as with any launch.
//   - thread-safe; per-device facts are looked up once and cached.
//
void softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream = nullptr);

// The same in 16-bit dtypes: x and y in bfloat16 or float16, each value converted to float32,
// the row's softmax computed as above, and the result rounded to the dtype (to nearest even).
// The contract is the float32 one with "4-byte aligned" read as "2-byte aligned".
void softmax(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t rows, int64_t cols,
             cudaStream_t stream = nullptr);
void softmax(const __half* x, __half* y, int64_t rows, int64_t cols, cudaStream_t stream = nullptr);
// softmax(nullptr, nullptr, ...) (an empty matrix) as it was before the 16-bit overloads: float32.
inline void softmax(std::nullptr_t x, std::nullptr_t y, int64_t rows, int64_t cols,
                    cudaStream_t stream = nullptr) {
  softmax(static_cast<const float*>(x), static_cast<float*>(y), rows, cols, stream);
}

// The backward pass: given the forward's output y and the gradient dy of the loss with respect
// to it, the gradient with respect to x, row by row: dx[r][c] = y[r][c] * (dy[r][c] - d_r),
// d_r = sum_c' dy[r][c'] * y[r][c'], computed in float32 and rounded to the dtype. The contract
// is the forward's, for three pointers: y and dy are read, dx is written; dx may be y or dy (in
// place) but may not otherwise overlap either.
void softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                      cudaStream_t stream = nullptr);
void softmax_backward(const __nv_bfloat16* y, const __nv_bfloat16* dy, __nv_bfloat16* dx,
                      int64_t rows, int64_t cols, cudaStream_t stream = nullptr);
void softmax_backward(const __half* y, const __half* dy, __half* dx, int64_t rows, int64_t cols,
                      cudaStream_t stream = nullptr);
// softmax_backward(nullptr, nullptr, nullptr, ...) (an empty matrix): float32.
inline void softmax_backward(std::nullptr_t y, std::nullptr_t dy, std::nullptr_t dx, int64_t rows,
                             int64_t cols, cudaStream_t stream = nullptr) {
  softmax_backward(static_cast<const float*>(y), static_cast<const float*>(dy),
                   static_cast<float*>(dx), rows, cols, stream);
}

// What softmax() would launch for these arguments on the current device, without launching it
// or touching memory. Like a first call of softmax(), it may create the device's context and set
// the library's kernels' function attributes (their shared memory and cluster sizes).
struct Plan {
  std::string path;    // the path's name in docs/library.md's path table ("warp", "cluster", ...);
                       // "empty" for an empty matrix
  std::string config;  // its launch: kernel parameters, blocks or clusters, threads a block
  std::string why;     // the rule that chose it
  bool clusters = false;  // whether this device and process use thread block clusters (false,
                          // unasked, for an empty matrix)
};
Plan describe(const float* x, const float* y, int64_t rows, int64_t cols);
Plan describe(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t rows, int64_t cols);
Plan describe(const __half* x, const __half* y, int64_t rows, int64_t cols);
inline Plan describe(std::nullptr_t x, std::nullptr_t y, int64_t rows, int64_t cols) {
  return describe(static_cast<const float*>(x), static_cast<const float*>(y), rows, cols);
}
Plan describe_backward(const float* y, const float* dy, const float* dx, int64_t rows,
                       int64_t cols);
Plan describe_backward(const __nv_bfloat16* y, const __nv_bfloat16* dy, const __nv_bfloat16* dx,
                       int64_t rows, int64_t cols);
Plan describe_backward(const __half* y, const __half* dy, const __half* dx, int64_t rows,
                       int64_t cols);
inline Plan describe_backward(std::nullptr_t y, std::nullptr_t dy, std::nullptr_t dx, int64_t rows,
                              int64_t cols) {
  return describe_backward(static_cast<const float*>(y), static_cast<const float*>(dy),
                           static_cast<const float*>(dx), rows, cols);
}

// Thread block clusters (sm_90 and later) carry the paths for long rows and few rows. Without
// them every shape still runs, on the other paths. They are on by default where the GPU has them
// and the library was built for it, unless the environment variable FASTSOFTMAX_NO_CLUSTERS holds
// a value other than "" and "0" when the program starts (it is read once, as the library is
// loaded); set_clusters_enabled(false) turns them off for this process (tests use it to run the
// fallbacks on Hopper).
bool clusters_enabled();
void set_clusters_enabled(bool on);

// One line on clusters for a program's output: in use on this device, or why not.
std::string cluster_report();

}  // namespace fastsoftmax
