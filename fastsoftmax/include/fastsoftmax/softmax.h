// SPDX-License-Identifier: MIT
// fastsoftmax: a row-wise softmax at the memory-bandwidth limit, for any row length.
//
//   #include <fastsoftmax/softmax.h>
//   fastsoftmax::softmax(x, y, rows, cols, stream);   // y[r][c] = exp(x[r][c]) / sum_c' exp(x[r][c'])
//
// The call picks one of several kernels by the shape, the pointers' alignment and the GPU (which
// path takes which shape, and why: docs/library.md). `describe` names the path a call would take.
#pragma once

#include <cuda_runtime.h>

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
// Other element types and the backward pass will be overloads beside this one.
void softmax(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream = nullptr);

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
