// SPDX-License-Identifier: MIT
// The contract every step shares: one launcher signature, one descriptor, one traffic model.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <ostream>

namespace softmax {

// y[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r) for a row-major rows x cols
// matrix. Every step's launcher has exactly this signature.
//
// Contract (checked by the test suite for every step):
//   - unusable arguments (rows or cols < 1, a null pointer or one not 4-byte aligned, cols above
//     the step's limit) throw
//     std::invalid_argument naming the problem, before anything is launched or written;
//   - the launch error is checked after every launch (a failure throws softmax::CudaError);
//   - the launch is asynchronous on `stream`, like any CUDA launch.
using LaunchFn = void (*)(const float* x, float* y, int rows, int cols, cudaStream_t stream);

// DRAM traffic a design implies, counted in float elements: per matrix element and per row.
// bytes(M, N) = 4 * (M*N*(reads_per_elem + writes_per_elem) + M*(reads_per_row + writes_per_row)).
struct Traffic {
  double reads_per_elem = 0;
  double writes_per_elem = 0;
  double reads_per_row = 0;
  double writes_per_row = 0;

  double read_bytes(int64_t rows, int64_t cols) const {
    return 4.0 * (double(rows) * double(cols) * reads_per_elem + double(rows) * reads_per_row);
  }
  double write_bytes(int64_t rows, int64_t cols) const {
    return 4.0 * (double(rows) * double(cols) * writes_per_elem + double(rows) * writes_per_row);
  }
  double bytes(int64_t rows, int64_t cols) const {
    return read_bytes(rows, cols) + write_bytes(rows, cols);
  }
};

// The fused ideal: every input element read once, every output element written once.
inline constexpr Traffic kIdealTraffic{1, 1, 0, 0};

inline constexpr int kNoColLimit = INT_MAX;

// What the step table records about a step (or a baseline).
struct Step {
  const char* name;    // "step05_vectorized": folder, target, test parameter, chart label
  const char* lesson;  // one line: what this step changes
  LaunchFn launch;
  int (*max_cols)();            // largest N it supports on the current device
  Traffic (*traffic)(int cols); // modeled DRAM traffic for rows of this length
};

// gtest and anyone else printing a Step: its name.
inline std::ostream& operator<<(std::ostream& os, const Step& s) { return os << s.name; }

// Throws std::invalid_argument naming the first problem with the arguments, if any.
// Every launcher calls this before it launches anything.
void check_launch_args(const char* step, const float* x, const float* y, int rows, int cols,
                       int max_cols);

}  // namespace softmax
