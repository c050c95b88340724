// SPDX-License-Identifier: MIT
// Verification against the double-precision reference, and the GPU check that feeds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/data.h"
#include "common/softmax.h"

namespace softmax {

// Tolerances: torch.allclose's defaults per element, and a bound on each row's sum.
inline constexpr double kAtol = 1e-8;
inline constexpr double kRtol = 1e-5;
inline constexpr double kRowSumTol = 1e-5;

// The output is filled with this byte before every run. 0xCDCDCDCD is the float -4.3e8: finite
// and negative, so it can never pass for a softmax value (nor for an expected NaN).
inline constexpr unsigned char kPoisonByte = 0xCD;
bool is_poison(float v);

struct Mismatch {
  int row = 0, col = 0;
  float got = 0;
  double expected = 0;
};

struct VerifyResult {
  int64_t elements = 0;
  int64_t bad_elements = 0;   // outside atol + rtol*|ref|, or NaN where a number belongs, or not
  int64_t unwritten = 0;      //   NaN where NaN belongs; `unwritten` counts those still poisoned
  int64_t bad_rows = 0;       // finite rows whose sum is off by more than kRowSumTol
  int64_t guard_writes = 0;   // elements written outside the output (GPU check only)
  double max_abs_err = 0;     // over finite expected values
  double max_rel_err = 0;
  double max_row_sum_err = 0;
  std::vector<Mismatch> first;  // the first few bad elements, in row-major order

  bool ok() const { return bad_elements == 0 && bad_rows == 0 && guard_writes == 0; }
  std::string report() const;  // one line if ok; with the first mismatches otherwise
};

VerifyResult verify(const std::vector<float>& y, const std::vector<double>& ref, int rows,
                    int cols);

// How check_step places the buffers: offsets in floats from a 256-byte aligned allocation, to
// test launchers with pointers that are not 16-byte aligned.
struct Placement {
  int x_offset = 0;
  int y_offset = 0;
};

// Runs `step` once on fresh input of the given kind and verifies everything: the output is
// poisoned first, and guard zones before and after it must stay untouched.
VerifyResult check_step(const Step& step, int rows, int cols, InputKind kind, uint64_t seed,
                        Placement placement = {});

}  // namespace softmax
