// SPDX-License-Identifier: MIT
// GPU tests: every step of the table on every shape and input kind; argument checking; baselines.
// Without a CUDA device each test reports SKIPPED with the runtime's reason.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "baselines/baselines.h"
#include "common/cuda_check.h"
#include "common/data.h"
#include "common/device_buffer.h"
#include "common/step_table.h"
#include "common/verify.h"
#include "gpu_test.h"

namespace softmax {
namespace {

struct Case {
  int rows, cols;
  InputKind kind = InputKind::kNormal;
  Placement placement = {};
};

std::string case_name(const Case& c) {
  std::string s = std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_" + to_string(c.kind);
  if (c.placement.x_offset) s += "_xoff" + std::to_string(c.placement.x_offset);
  if (c.placement.y_offset) s += "_yoff" + std::to_string(c.placement.y_offset);
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> list = {{1823, 781}};  // the irregular verification matrix
  for (int n : {1, 2, 31, 32, 33, 1023, 1024, 1025, 4096, 4097, 16384}) list.push_back({1, n});
  list.push_back({70000, 3});   // many tiny rows
  list.push_back({4096, 1});
  // Row starts not 16-byte aligned (N % 4 != 0), and pointers offset by one float.
  for (int n : {129, 130, 131, 1029, 1030, 1031, 5001, 5002, 5003}) list.push_back({33, n});
  for (int n : {781, 1024, 4096, 8192}) {
    list.push_back({33, n, InputKind::kNormal, {1, 0}});
    list.push_back({33, n, InputKind::kNormal, {0, 1}});
    list.push_back({33, n, InputKind::kNormal, {3, 1}});
  }
  // Magnitudes that overflow exp() unless the max is subtracted first.
  for (int n : {3, 781, 4097}) {
    list.push_back({64, n, InputKind::kHuge});
    list.push_back({64, n, InputKind::kLarge});
  }
  // -inf / +inf / NaN entries (the 6-row pattern of make_input), short and long rows: every
  // step07 path (sub-warp, warp, block in registers, pipelined block, single-buffer block, and
  // their scalar versions).
  for (int n : {1, 2, 5, 64, 781, 1024, 4096, 4097, 16384, 20000, 40000})
    list.push_back({12, n, InputKind::kNonFinite});
  list.push_back({64, 4096, InputKind::kHuge});
  // Aligned rows of 2-12 float4 per lane and enough of them that step07's warps take a second
  // row whose loads were issued before the first was reduced (two rows per warp at 1001 rows).
  for (int n : {256, 384, 640, 1024, 1536}) list.push_back({1001, n});
  list.push_back({64, 1024, InputKind::kHuge});
  // Rows past step07's register path whose two buffers fit in shared memory (pipelined), and rows
  // longer than two buffers but shorter than one (single buffer).
  list.push_back({3, 20000});
  list.push_back({3, 40000});
  return list;
}

struct Param {
  Step step;
  Case c;
};

// Readable names in gtest's output instead of a byte dump.
void PrintTo(const Param& p, std::ostream* os) { *os << p.step.name << " on " << case_name(p.c); }

std::vector<Param> params() {
  std::vector<Param> list;
  for (const Step& s : all_steps())
    for (const Case& c : cases()) list.push_back({s, c});
  return list;
}

class StepOnShape : public testing::GpuTest<::testing::TestWithParam<Param>> {};

TEST_P(StepOnShape, MatchesReference) {
  const auto& [step, c] = GetParam();
  ASSERT_LE(c.cols, step.max_cols()) << "the suite's shapes stay within every step's limit";
  const VerifyResult r = check_step(step, c.rows, c.cols, c.kind, next_seed(), c.placement);
  EXPECT_TRUE(r.ok()) << step.name << " on " << case_name(c) << ": " << r.report();
}

INSTANTIATE_TEST_SUITE_P(AllSteps, StepOnShape, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(info.param.step.name) + "_" + case_name(info.param.c);
                         });

// Bad arguments: a clear error naming the problem, nothing launched, nothing written.
class StepArguments : public testing::GpuTest<::testing::TestWithParam<Step>> {
 protected:
  static constexpr int kRows = 4, kCols = 64;
  DeviceBuffer<float> x_, y_;  // allocated in SetUp, after the GPU check

  void SetUp() override {
    testing::GpuTest<::testing::TestWithParam<Step>>::SetUp();
    if (IsSkipped()) return;
    x_ = DeviceBuffer<float>(kRows * kCols);
    y_ = DeviceBuffer<float>(kRows * kCols);
    CUDA_CHECK(cudaMemset(x_.get(), 0, kRows * kCols * sizeof(float)));
    CUDA_CHECK(cudaMemset(y_.get(), kPoisonByte, kRows * kCols * sizeof(float)));
  }

  // Runs the call, expects std::invalid_argument mentioning `needle`, and an untouched output.
  void expect_rejected(const std::function<void()>& call, const std::string& needle) {
    const Step& step = GetParam();
    try {
      call();
      ADD_FAILURE() << step.name << ": no error for a call that should mention '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(step.name), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> y(kRows * kCols);
    CUDA_CHECK(cudaMemcpy(y.data(), y_.get(), y.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(is_poison(y[i])) << "output written at " << i;
  }
};

TEST_P(StepArguments, RejectsNullInput) {
  expect_rejected([&] { GetParam().launch(nullptr, y_.get(), kRows, kCols, 0); }, "x is null");
}
TEST_P(StepArguments, RejectsNullOutput) {
  expect_rejected([&] { GetParam().launch(x_.get(), nullptr, kRows, kCols, 0); }, "y is null");
}
TEST_P(StepArguments, RejectsZeroRows) {
  expect_rejected([&] { GetParam().launch(x_.get(), y_.get(), 0, kCols, 0); }, "rows must be >= 1");
}
TEST_P(StepArguments, RejectsNegativeCols) {
  expect_rejected([&] { GetParam().launch(x_.get(), y_.get(), kRows, -5, 0); }, "cols must be >= 1");
}

// At the step's own limit it works; one column past it, it refuses (only steps with a limit).
TEST_P(StepArguments, LimitIsExactOrAbsent) {
  const Step& step = GetParam();
  const int limit = step.max_cols();
  if (limit == kNoColLimit) {
    // No limit to probe: check a row longer than any step's shared memory holds (64K floats,
    // 256 KB) instead.
    const VerifyResult r = check_step(step, 2, 1 << 16, InputKind::kNormal, next_seed());
    EXPECT_TRUE(r.ok()) << r.report();
    return;
  }
  const VerifyResult r = check_step(step, 2, limit, InputKind::kNormal, next_seed());
  EXPECT_TRUE(r.ok()) << step.name << " at its limit N = " << limit << ": " << r.report();
  DeviceBuffer<float> big_x(size_t(2) * (limit + 1)), big_y(size_t(2) * (limit + 1));
  expect_rejected([&] { step.launch(big_x.get(), big_y.get(), 2, limit + 1, 0); },
                  "exceeds this step's limit of " + std::to_string(limit));
}

// A step's traffic model may depend on the device (step07 switches paths at the shared-memory
// size), hence a GPU test. No design moves fewer bytes than the fused ideal.
TEST_P(StepArguments, TrafficModelIsAtLeastTheIdeal) {
  const Step& step = GetParam();
  for (int cols : {1, 3, 781, 4096, 16384, 1 << 16, 1 << 20}) {
    if (cols > step.max_cols()) continue;
    EXPECT_GE(step.traffic(cols).bytes(64, cols), kIdealTraffic.bytes(64, cols)) << cols;
  }
}

INSTANTIATE_TEST_SUITE_P(AllSteps, StepArguments, ::testing::ValuesIn(all_steps()),
                         [](const ::testing::TestParamInfo<Step>& info) {
                           return std::string(info.param.name);
                         });

// The baselines the charts compare against must compute the same function.
class Baseline : public testing::GpuTest<::testing::TestWithParam<Step>> {};

TEST_P(Baseline, MatchesReference) {
  for (Case c : {Case{1823, 781}, Case{1, 4097}, Case{70000, 3}, Case{64, 781, InputKind::kHuge}}) {
    const VerifyResult r = check_step(GetParam(), c.rows, c.cols, c.kind, next_seed());
    EXPECT_TRUE(r.ok()) << GetParam().name << " on " << case_name(c) << ": " << r.report();
  }
}

INSTANTIATE_TEST_SUITE_P(Baselines, Baseline, ::testing::ValuesIn(baselines::all()),
                         [](const ::testing::TestParamInfo<Step>& info) {
                           return std::string(info.param.name);
                         });

TEST(BaselineList, HasCudnnExactlyWhenCMakeFoundIt) {
#ifdef SOFTMAX_EXPECT_CUDNN
  EXPECT_TRUE(baselines::have_cudnn());
#else
  EXPECT_FALSE(baselines::have_cudnn());
#endif
  EXPECT_EQ(std::string(baselines::all().front().name), "unfused");
}

}  // namespace
}  // namespace softmax
