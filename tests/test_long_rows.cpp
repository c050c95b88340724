// SPDX-License-Identifier: MIT
// Long rows: every step of the table on a few rows as long as it accepts. A step limited by the
// device (steps 04-06 keep the whole row in shared memory) is asked for its limit at run time; a
// step without a limit gets 300,007 columns, a length at which step02's per-lane float sums, before
// they were compensated, left the 1e-5 tolerance.
// Without a CUDA device each test reports SKIPPED.
#include <gtest/gtest.h>

#include <string>

#include "common/data.h"
#include "common/step_table.h"
#include "common/verify.h"
#include "gpu_test.h"

namespace softmax {
namespace {

// Odd, so every row after the first starts off a 16-byte boundary as well.
constexpr int kUnlimitedCols = 300007;
constexpr int kRows = 3;

// The longest row `step` accepts on the current device (or kUnlimitedCols). Queries the device,
// so it is called inside a test, after GpuTest has checked that there is one.
int longest_row(const Step& step) {
  const int limit = step.max_cols();
  return limit == kNoColLimit ? kUnlimitedCols : limit;
}

class StepOnLongestRow : public testing::GpuTest<::testing::TestWithParam<Step>> {};

TEST_P(StepOnLongestRow, MatchesReference) {
  const Step& step = GetParam();
  const int cols = longest_row(step);
  ::testing::Test::RecordProperty("cols", cols);  // in --gtest_output=xml
  // Aligned, and x and y off 16-byte boundaries by different amounts (the scalar paths).
  for (const Placement p : {Placement{0, 0}, Placement{1, 2}}) {
    const VerifyResult r = check_step(step, kRows, cols, InputKind::kNormal, next_seed(), p);
    EXPECT_TRUE(r.ok()) << step.name << " on " << kRows << "x" << cols << " x+" << p.x_offset
                        << " y+" << p.y_offset << ": " << r.report();
  }
}

// CTest names: long_rows/StepOnLongestRow.MatchesReference/<step> (ctest -R long_rows).
INSTANTIATE_TEST_SUITE_P(long_rows, StepOnLongestRow, ::testing::ValuesIn(all_implementations()),
                         [](const ::testing::TestParamInfo<Step>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace softmax
