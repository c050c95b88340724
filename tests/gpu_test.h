// SPDX-License-Identifier: MIT
// Base fixture of every test that needs a GPU: SKIPPED, with the runtime's reason, without one.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/device.h"

namespace softmax::testing {

template <typename Base = ::testing::Test>
class GpuTest : public Base {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_available(&why)) GTEST_SKIP() << why;
  }
};

}  // namespace softmax::testing
