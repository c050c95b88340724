// SPDX-License-Identifier: MIT
// The step table and the traffic models (no GPU needed).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baselines/baselines.h"
#include "common/step_table.h"

namespace softmax {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, sep);) parts.push_back(p);
  return parts;
}

const Step& step_named(const std::string& name) {
  for (const Step& s : all_steps())
    if (name == s.name) return s;
  throw std::runtime_error("no step " + name);
}

TEST(StepTable, ListsEveryStepFolderInOrder) {
  // CMake passes the folders it built; a folder missing from the table (or the reverse) fails here.
  const std::vector<std::string> folders = split(SOFTMAX_STEP_FOLDERS, ',');
  const std::vector<Step>& table = all_steps();
  ASSERT_EQ(table.size(), folders.size());
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(table[i].name, folders[i]);
    char prefix[32];  // "step" + up to 20 digits + "_"
    std::snprintf(prefix, sizeof prefix, "step%02zu_", i);
    EXPECT_EQ(std::string(table[i].name).rfind(prefix, 0), 0u) << table[i].name;
  }
}

TEST(StepTable, EveryEntryIsComplete) {
  std::set<std::string> names;
  for (const Step& s : all_steps()) {
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    EXPECT_NE(s.launch, nullptr) << s.name;
    EXPECT_NE(s.max_cols, nullptr) << s.name;
    EXPECT_NE(s.traffic, nullptr) << s.name;
    EXPECT_GT(std::string(s.lesson).size(), 10u) << s.name;
  }
}

TEST(TrafficModel, Step00ReadsThreeTimesWritesOnce) {
  const Traffic t = step_named("step00_naive").traffic(4096);
  EXPECT_DOUBLE_EQ(t.read_bytes(4096, 4096), 3.0 * 4096 * 4096 * 4);
  EXPECT_DOUBLE_EQ(t.write_bytes(4096, 4096), 1.0 * 4096 * 4096 * 4);
  EXPECT_DOUBLE_EQ(t.bytes(1823, 781), 16.0 * 1823 * 781);
}

TEST(TrafficModel, Step01ReadsTwiceWritesOnce) {
  const Traffic t = step_named("step01_online").traffic(4096);
  EXPECT_DOUBLE_EQ(t.bytes(4096, 4096), 12.0 * 4096 * 4096);
}

TEST(TrafficModel, UnfusedMatchesTritonsCount) {
  // Reads 5MN + 2M, writes 3MN + 2M elements.
  const double m = 4096, n = 1000;
  const Traffic t = baselines::unfused().traffic(1000);
  EXPECT_DOUBLE_EQ(t.read_bytes(4096, 1000), 4 * (5 * m * n + 2 * m));
  EXPECT_DOUBLE_EQ(t.write_bytes(4096, 1000), 4 * (3 * m * n + 2 * m));
}

TEST(TrafficModel, IdealIsOneReadOneWrite) {
  EXPECT_DOUBLE_EQ(kIdealTraffic.bytes(4096, 4096), 8.0 * 4096 * 4096);
}

}  // namespace
}  // namespace softmax
