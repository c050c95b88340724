// SPDX-License-Identifier: MIT
// check_launch_args, the argument check every launcher runs first: host code, so a CPU test.
// The pointers are never dereferenced; only their values matter.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/softmax.h"

namespace softmax {
namespace {

const float* at(uintptr_t address) { return reinterpret_cast<const float*>(address); }
float* out_at(uintptr_t address) { return reinterpret_cast<float*>(address); }

// The message of the std::invalid_argument thrown, or "" if none was.
std::string rejection(const float* x, float* y, int rows, int cols, int max_cols = kNoColLimit) {
  try {
    check_launch_args("stepXX_test", x, y, rows, cols, max_cols);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchArgs, AcceptsAnyFourByteAlignedPointers) {
  // 16-byte alignment is the launcher's business (a float4 path or not), not an error.
  for (uintptr_t offset : {0, 4, 8, 12})
    EXPECT_EQ(rejection(at(0x10000 + offset), out_at(0x20000 + (12 - offset)), 3, 5), "") << offset;
  EXPECT_EQ(rejection(at(0x10000), out_at(0x20000), 1, 1, 1), "");
}

TEST(LaunchArgs, NamesEachProblem) {
  const float* x = at(0x10000);
  float* y = out_at(0x20000);
  struct Bad {
    std::string got, needle;
  };
  const Bad cases[] = {
      {rejection(nullptr, y, 3, 5), "x is null"},
      {rejection(x, nullptr, 3, 5), "y is null"},
      {rejection(at(0x10002), y, 3, 5), "x is not 4-byte aligned"},
      {rejection(at(0x10001), y, 3, 5), "x is not 4-byte aligned"},
      {rejection(x, out_at(0x20003), 3, 5), "y is not 4-byte aligned"},
      {rejection(x, y, 0, 5), "rows must be >= 1 (got 0)"},
      {rejection(x, y, 3, -5), "cols must be >= 1 (got -5)"},
      {rejection(x, y, 3, 101, 100), "cols = 101 exceeds this step's limit of 100"},
  };
  for (const Bad& b : cases) {
    EXPECT_NE(b.got.find(b.needle), std::string::npos) << "'" << b.got << "' lacks " << b.needle;
    EXPECT_EQ(b.got.rfind("stepXX_test: ", 0), 0u) << b.got;
  }
}

TEST(LaunchArgs, NullIsReportedBeforeAlignment) {
  EXPECT_NE(rejection(nullptr, out_at(0x20002), 3, 5).find("x is null"), std::string::npos);
  EXPECT_NE(rejection(at(0x10002), out_at(0x20002), 3, 5).find("x is not"), std::string::npos);
}

}  // namespace
}  // namespace softmax
