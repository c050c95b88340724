// SPDX-License-Identifier: MIT
// Command-line options of the step programs and the tour.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace softmax {

// The verification shape: irregular on purpose (not a multiple of 32, 128 or 4 in either
// dimension), as in Triton's fused-softmax tutorial.
inline constexpr int kVerifyRows = 1823;
inline constexpr int kVerifyCols = 781;

// The bandwidth sweep: M = 4096 rows, N = 256 .. 16384.
inline constexpr int kSweepRows = 4096;
std::vector<int> sweep_cols();

struct Options {
  int rows = kSweepRows;  // --rows: M of the timed shapes
  int cols = 0;           // --cols: one N instead of the sweep (0: the sweep)
  bool verify_only = false;
  int iters = 50;         // timed runs per shape (median and min reported)
  std::string json_path;  // --json FILE
  bool help = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws UsageError naming the offending option.
Options parse_args(int argc, const char* const* argv);

// `text` as an int >= min_value; throws UsageError naming `option` otherwise (the tools' own
// arguments use it too).
int parse_int(const std::string& option, const std::string& text, int min_value);

// "ROWSxCOLS" (both >= 1), as the tools take shapes on their command lines; throws UsageError
// naming the text otherwise.
struct RowsCols {
  int rows, cols;
};
RowsCols parse_shape(const std::string& text);

std::string usage(const std::string& program);

}  // namespace softmax
