// SPDX-License-Identifier: MIT
// GPU tests: every step of the table on every shape and input kind; argument checking; baselines.
// Without a CUDA device each test reports SKIPPED with the runtime's reason.
#include <gtest/gtest.h>

#include <algorithm>
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
  list.push_back({70000, 3});  // many tiny rows
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
  // Aligned rows of 2-9 float4 per lane and enough of them that step07's warps take a second
  // row whose loads were issued before the first was reduced (two rows per warp at 1001 rows).
  for (int n : {256, 384, 640, 1024, 1152}) list.push_back({1001, n});
  list.push_back({64, 1024, InputKind::kHuge});
  // Rows past step07's register path whose two buffers fit in shared memory (pipelined), and rows
  // longer than two buffers but shorter than one (single buffer).
  list.push_back({3, 20000});
  list.push_back({3, 40000});
  return list;
}

// One test per step, each checking every case: a process per step rather than per case keeps
// the suite's start-up costs (a CUDA context a process) down.
class StepOnShape : public testing::GpuTest<::testing::TestWithParam<Step>> {};

TEST_P(StepOnShape, MatchesReference) {
  const Step& step = GetParam();
  int failed = 0;
  for (const Case& c : cases()) {
    ASSERT_LE(c.cols, step.max_cols()) << "the suite's shapes stay within every step's limit";
    const VerifyResult r = check_step(step, c.rows, c.cols, c.kind, next_seed(), c.placement);
    if (!r.ok() && ++failed <= 6)
      ADD_FAILURE() << step.name << " on " << case_name(c) << ": " << r.report();
  }
  EXPECT_EQ(failed, 0) << step.name << ": " << failed << " of " << cases().size() << " cases failed";
}

INSTANTIATE_TEST_SUITE_P(AllSteps, StepOnShape, ::testing::ValuesIn(all_implementations()),
                         [](const ::testing::TestParamInfo<Step>& info) {
                           return std::string(info.param.name);
                         });

// Groups of shapes: every combination of the group's row lengths, input kinds and placements. A
// test per group for step07, step08 and the library, whose dispatch the groups were drawn around;
// a test per step for the others (CTest runs each test in its own process, whose start-up costs
// more than most groups' launches).
//
// Row lengths B-4 .. B+4 around each path boundary B of step07, where B is the last aligned N
// (N % 4 == 0) on the lower side. A row of N floats starting `lead` floats past a 16-byte boundary
// spans ceil((lead + N) / 4) 16-byte slots; with N % 4 == 0 and 16-byte aligned pointers that is
// N / 4, otherwise at most floor((N + 6) / 4), so on unaligned rows the same boundary falls at
// B-3 / B-2: the nine lengths hold both sides of both, with every N % 4.
// Placements: aligned; x and y offset alike (whole rows off a 16-byte boundary, partial head and
// tail slots); x and y offset differently (no common alignment: the scalar fallback).
struct Group {
  const char* name;  // test-name suffix: the boundary or feature the group reaches
  int rows;
  std::vector<int> cols;
  std::vector<InputKind> kinds = {InputKind::kNormal};
  std::vector<Placement> placements = {{0, 0}};
};

std::vector<int> around(int b) {
  std::vector<int> cols;
  for (int n = std::max(1, b - 4); n <= b + 4; ++n) cols.push_back(n);
  return cols;
}

std::vector<Placement> all_offsets() {
  std::vector<Placement> list;
  for (int xo = 0; xo < 4; ++xo)
    for (int yo = 0; yo < 4; ++yo) list.push_back({xo, yo});
  return list;
}

std::vector<Group> groups() {
  const std::vector<InputKind> normal_and_ends = {InputKind::kNormal, InputKind::kMaxAtEnds};
  const std::vector<InputKind> ends = {InputKind::kMaxAtEnds, InputKind::kOneFiniteAtEnds};
  const std::vector<Placement> boundary_offsets = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {1, 2}};
  const std::vector<Placement> ends_offsets = {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {1, 2}, {3, 0}};
  // Slot counts S (per row) in step07's dispatch: (a) S <= 32 in sub-warp groups of 1..32 lanes,
  // except (a') unaligned rows of 17..131 floats on matrices of at least 2.5 tiles per SM: tiles
  // of rows through shared memory, 2, 4, 8 or 16 lanes a row, 9..16 floats a lane; (b) S <= 288 a warp per row with P = ceil(S / 32) float4 per lane, two
  // kernels alternating by P; (c) S <= 4096 a block per row in registers (128 threads, 3-16
  // float4 each, up to S = 2048, then 256), (d) a row cached in shared memory, (e) two passes
  // over global memory.
  std::vector<Group> list = {
      {"a_lanes1_to_2", 33, around(4), normal_and_ends, boundary_offsets},
      {"a_lanes2_to_4", 33, around(8), normal_and_ends, boundary_offsets},
      {"a_lanes4_to_8", 33, around(16), normal_and_ends, boundary_offsets},
      {"a_lanes8_to_16", 33, around(32), normal_and_ends, boundary_offsets},
      {"a_lanes16_to_32_and_tile", 33, around(64), normal_and_ends, boundary_offsets},
      {"a_tile_to_b", 33, around(128), normal_and_ends, boundary_offsets},
      // Tiles of rows (a'), which serve only matrices of at least 2.5 tiles per SM: 65537 rows of
      // 17 floats make 513 tiles (128 rows each, the last holding one), enough up to 205 SMs;
      // longer rows make more. Each lane count and its ends, rows of N % 4 == 0 off their
      // boundary (x + 1, + 3), every tile alignment, the maximum at a row's ends.
      {"a_tiles",
       65537,
       {17, 19, 31, 32, 33, 61, 64, 65, 67, 125, 127, 128, 129, 131},
       {InputKind::kMaxAtEnds},
       {{0, 0}, {1, 1}, {3, 3}}},
      // step08 takes tiles for unaligned rows of 2-16 floats too, one lane a row, from 2.5-6.8
      // tiles per SM by the length (4096 floats a tile, so 2048 rows of 2 floats, 256 of 9-16):
      // 2.2M rows of 2-3 floats make 1075-1719 tiles, 400000 rows of 4-16 floats 391-1563: 391
      // tiles of rows of 4 floats are 2.5 a SM up to 156 SMs, and every other length here passes
      // its own threshold up to 179 SMs or more (5 floats: 521 tiles, 2.9 a SM). Rows of 4 and
      // 16 floats take them when x is off its boundary (x + 1). Rows of one float take step08's
      // path (a1) at any number of rows, and rows of two on an 8-byte boundary its path (a2)
      // (below): here x + 1 only.
      {"a_tiles_one_lane_short", 2200000, {1, 2, 3}, {InputKind::kMaxAtEnds}, {{0, 0}, {1, 1}}},
      {"a_tiles_one_lane",
       400000,
       {4, 5, 7, 9, 14, 15, 16},
       {InputKind::kMaxAtEnds},
       {{0, 0}, {1, 1}}},
      // Rows of one float, which step08 takes as one vector of M floats, four rows a float4
      // (path a1): 5 rows (its head and tail only, no float4), 262147 (one block per 256 float4)
      // and 1048579; every x and y offset (those that differ take path f), non-finite values.
      {"a1_one_float_5", 5, {1}, {InputKind::kNormal, InputKind::kNonFinite}, all_offsets()},
      {"a1_one_float_262147",
       262147,
       {1},
       {InputKind::kNormal, InputKind::kNonFinite},
       all_offsets()},
      {"a1_one_float_1048579",
       1048579,
       {1},
       {InputKind::kNonFinite},
       {{0, 0}, {1, 1}, {2, 2}, {3, 3}}},
      // Rows of two floats, which step08 takes as one vector of 2M floats, two rows a float4,
      // where x lies on an 8-byte boundary (path a2, change 43): one row (in the head at x + 2, in
      // the tail at x + 0), 6 rows (a row in the head and one in the tail at x + 2), 262147 rows
      // (a block per 256 float4, 513 blocks); every x and y offset (x + 1 and x + 3 keep the
      // other paths, offsets that differ take path f), non-finite values.
      {"a2_two_floats_1", 1, {2}, {InputKind::kNormal, InputKind::kNonFinite}, all_offsets()},
      {"a2_two_floats_6",
       6,
       {2},
       {InputKind::kNormal, InputKind::kNonFinite, InputKind::kMaxAtEnds},
       all_offsets()},
      {"a2_two_floats_262147",
       262147,
       {2},
       {InputKind::kNormal, InputKind::kNonFinite},
       all_offsets()},
      // Aligned rows of 5-32 slots on 65536 rows, 1.5 waves or more of one-slot groups on GPUs of
      // up to ~170 SMs: (a) switches to 4 or 8 lanes a row holding 2-4 slots each.
      {"a_many_rows_wide_lanes",
       65536,
       {20, 24, 32, 36, 60, 64, 68, 100, 124, 128},
       normal_and_ends,
       {{0, 0}}},
      // Enough rows for 1.5 waves of blocks: (a) and (b) launch one row per group, no loop.
      {"ab_one_row_per_group",
       40000,
       {7, 32, 61, 64, 128, 256, 1031, 1152},
       {InputKind::kNormal},
       {{0, 0}, {1, 1}, {3, 3}}},
      // 1.3-1.9 waves of (b)'s one-row blocks at 5-9 float4 a lane: step08 keeps the persistent
      // grid there (past 1.5 waves since its change 15), each warp taking 3-4 rows with the next
      // in flight.
      {"b_persistent_rounds", 8000, {640, 1001, 1152}, {InputKind::kNormal}, {{0, 0}, {1, 1}}},
      // step08 keeps its persistent grid, with the next row in flight, only on matrices of 31 KB
      // an SM or more (4.19 MB on an H100; smaller ones take a block per group, one row each), so
      // its 33-row groups above no longer reach it:
      // (a)'s 32-lane rows on 10000 rows (5.2 MB at N = 131), (b) at every slot count a lane on
      // 6000 (6.1 MB at N = 256), aligned and not, under 1.5 (3) waves of blocks.
      {"a_persistent_next", 10000, {100, 131}, {InputKind::kNormal}, {{0, 0}, {1, 1}}},
      {"b_persistent_next",
       6000,
       {256, 257, 384, 385, 640, 769, 1001, 1024, 1152, 1155},
       {InputKind::kNormal},
       {{0, 0}, {1, 1}}},
      {"b_p2_to_p3", 33, around(256), normal_and_ends, boundary_offsets},
      {"b_p3_to_p4", 33, around(384), normal_and_ends, boundary_offsets},  // kernel switch
      {"b_p4_to_p5", 33, around(512), normal_and_ends, boundary_offsets},  // and back
      {"b_to_c", 33, around(1152), normal_and_ends, boundary_offsets},
      // step08 only: unaligned rows of 257-288 slots take (c) there in blocks of 64 threads,
      // aligned ones stay in (b).
      {"b_to_c_unaligned_step08", 33, around(1028), normal_and_ends, boundary_offsets},
      {"c_p3_to_p4", 33, around(1536), normal_and_ends, boundary_offsets},
      {"c_p4_to_p5", 33, around(2048), normal_and_ends, boundary_offsets},
      {"c_128_to_256_threads", 9, around(8192), normal_and_ends, boundary_offsets},
      {"c_to_d", 5, around(16384), normal_and_ends, boundary_offsets},
      // (d) to (e) where an H100's 227 KB of shared memory per block runs out (58,112 floats less
      // what the kernel keeps for itself); StepAtSwitches finds the exact N on any device. Past
      // steps 04-06's limit (57,600 floats on an H100): refused, as LimitIsExactOrAbsent checks.
      {"d_to_e_h100",
       3,
       {58000, 58001, 58002, 58003, 58080, 58081, 58112, 58113, 60000, 60003},
       {InputKind::kNormal},
       {{0, 0}, {1, 1}, {1, 2}}},
      // Every x and y offset against each other, on an aligned and an odd row length in (b), and
      // once in (a), (c), (d) and (e).
      {"offsets_1024", 33, {1024}, {InputKind::kNormal}, all_offsets()},
      {"offsets_1031", 33, {1031}, {InputKind::kNormal}, all_offsets()},
      {"offsets_61", 33, {61}, {InputKind::kNormal}, all_offsets()},
      {"offsets_4099", 9, {4099}, {InputKind::kNormal}, all_offsets()},
      {"offsets_20001", 5, {20001}, {InputKind::kNormal}, all_offsets()},
      {"offsets_70001", 3, {70001}, {InputKind::kNormal}, {{0, 0}, {1, 1}, {3, 3}, {1, 2}, {2, 0}}},
      // The row's maximum, or its only finite value, in a partial head or tail slot: 24 rows so
      // every end position (6) meets every row alignment (4) and both heights of kMaxAtEnds.
      {"ends_a", 24, {1, 2, 3, 5, 6, 7, 13, 30, 61, 63, 64}, ends, ends_offsets},
      {"ends_b", 24, {126, 131, 254, 385, 510, 1024, 1031, 1537, 2046}, ends, ends_offsets},
      {"ends_c", 12, {2051, 4096, 4099, 8190, 16381}, ends, ends_offsets},
      {"ends_d", 12, {16382, 20000, 20001, 40003}, ends, ends_offsets},
      {"ends_e", 12, {70000, 70001, 100002}, ends, ends_offsets},
  };
  return list;
}

std::string shape_name(int rows, int cols, InputKind kind, Placement p) {
  return std::to_string(rows) + "x" + std::to_string(cols) + " " + to_string(kind) + " x+" +
         std::to_string(p.x_offset) + " y+" + std::to_string(p.y_offset);
}

struct GroupParam {
  Step step;
  Group group;
};

void PrintTo(const GroupParam& p, std::ostream* os) {
  *os << p.step.name << " on " << p.group.name;
}

// The groups of many rows (tens of millions of elements to verify on the host) reach the row-count
// rules of step07, step08 and the library; the one-kernel steps before them take such matrices
// the way they take small ones. So those groups run for steps 00-06 only in the exhaustive set
// (CTest label "exhaustive": ctest --preset exhaustive); every other group runs for every step.
bool large(const Group& g) {
  size_t elements = 0;
  for (int c : g.cols) elements += size_t(g.rows) * c;
  return elements * g.kinds.size() * g.placements.size() > (size_t(20) << 20);
}

bool has_row_count_rules(const Step& s) {
  const std::string name = s.name;
  return name == "step07_persistent" || name == "step08_cluster" || name == "fastsoftmax";
}

// A test per group for the steps with row-count rules; the large groups of the others, a test
// each in the exhaustive set. (The others' small groups run in one test per step: StepOnGroups.)
std::vector<GroupParam> group_params(bool exhaustive) {
  std::vector<GroupParam> list;
  for (const Step& s : all_implementations())
    for (const Group& g : groups())
      if (exhaustive ? large(g) && !has_row_count_rules(s) : has_row_count_rules(s))
        list.push_back({s, g});
  return list;
}

std::vector<Step> steps_without_row_count_rules() {
  std::vector<Step> list;
  for (const Step& s : all_implementations())
    if (!has_row_count_rules(s)) list.push_back(s);
  return list;
}

// Checks `step` on every combination; reports the first few failures in full, counts the rest.
void check_all(const Step& step, int rows, const std::vector<int>& cols_list,
               const std::vector<InputKind>& kinds, const std::vector<Placement>& placements) {
  constexpr int kReported = 6;
  int failed = 0, checked = 0;
  for (int cols : cols_list) {
    if (cols > step.max_cols()) {
      // Past the step's own limit (steps 04-06 cache the whole row in shared memory): refused
      // before anything is launched.
      EXPECT_THROW(check_step(step, rows, cols, kinds.front(), next_seed(), placements.front()),
                   std::invalid_argument)
          << step.name << " at N = " << cols << " past its limit " << step.max_cols();
      continue;
    }
    for (InputKind kind : kinds)
      for (const Placement& p : placements) {
        ++checked;
        const VerifyResult r = check_step(step, rows, cols, kind, next_seed(), p);
        if (r.ok()) continue;
        if (++failed <= kReported)
          ADD_FAILURE() << step.name << " on " << shape_name(rows, cols, kind, p) << ": "
                        << r.report();
      }
  }
  if (failed > kReported)
    ADD_FAILURE() << step.name << ": " << failed - kReported << " more of " << checked
                  << " shapes failed";
  ::testing::Test::RecordProperty("shapes_checked", checked);
}

class StepOnGroup : public testing::GpuTest<::testing::TestWithParam<GroupParam>> {};

TEST_P(StepOnGroup, MatchesReference) {
  const auto& [step, g] = GetParam();
  check_all(step, g.rows, g.cols, g.kinds, g.placements);
}

const auto group_test_name = [](const ::testing::TestParamInfo<GroupParam>& info) {
  return std::string(info.param.step.name) + "_" + info.param.group.name;
};
INSTANTIATE_TEST_SUITE_P(AllSteps, StepOnGroup, ::testing::ValuesIn(group_params(false)),
                         group_test_name);
// Steps 00-06 on every small group, one test (one process) a step.
class StepOnGroups : public testing::GpuTest<::testing::TestWithParam<Step>> {};

TEST_P(StepOnGroups, MatchesReference) {
  const Step& step = GetParam();
  for (const Group& g : groups())
    if (!large(g)) check_all(step, g.rows, g.cols, g.kinds, g.placements);
}

INSTANTIATE_TEST_SUITE_P(AllSteps, StepOnGroups,
                         ::testing::ValuesIn(steps_without_row_count_rules()),
                         [](const ::testing::TestParamInfo<Step>& info) {
                           return std::string(info.param.name);
                         });

// tests/CMakeLists.txt gives the tests whose names start with "Exhaustive/" the label.
INSTANTIATE_TEST_SUITE_P(Exhaustive, StepOnGroup, ::testing::ValuesIn(group_params(true)),
                         group_test_name);

// Where a step's traffic model changes with N it changes path (step07: the row no longer fits in
// shared memory, about 58,000 floats on an H100, device-dependent), and a step with a column
// limit has an edge there: N within 8 of each such point, with offsets, on the current device.
class StepAtSwitches : public testing::GpuTest<::testing::TestWithParam<Step>> {};

TEST_P(StepAtSwitches, AroundEachTrafficChangeAndTheLimit) {
  const Step& step = GetParam();
  const int limit = step.max_cols();
  const int top = std::min(limit, 1 << 17);
  auto same = [](const Traffic& a, const Traffic& b) {
    return a.reads_per_elem == b.reads_per_elem && a.writes_per_elem == b.writes_per_elem &&
           a.reads_per_row == b.reads_per_row && a.writes_per_row == b.writes_per_row;
  };
  std::vector<int> points;
  Traffic before = step.traffic(1);
  for (int n = 2; n <= top; ++n) {
    const Traffic t = step.traffic(n);
    if (!same(t, before)) points.push_back(n);
    before = t;
  }
  ASSERT_LE(points.size(), 4u) << step.name
                               << ": the traffic model changes more often than "
                                  "this test expects; test the changes that matter";
  if (limit != kNoColLimit) points.push_back(limit);
  std::string at;
  for (int b : points) at += (at.empty() ? "" : ",") + std::to_string(b);
  ::testing::Test::RecordProperty("points", at);  // in --gtest_output=xml
  for (int b : points) {
    std::vector<int> cols;
    for (int n = std::max(1, b - 8); n <= std::min(limit, b + 8); ++n) cols.push_back(n);
    check_all(step, 3, cols, {InputKind::kNormal}, {{0, 0}, {1, 1}, {3, 3}, {1, 2}, {2, 1}});
  }
}

INSTANTIATE_TEST_SUITE_P(AllSteps, StepAtSwitches, ::testing::ValuesIn(all_implementations()),
                         [](const ::testing::TestParamInfo<Step>& info) {
                           return std::string(info.param.name);
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
// A float pointer 2 bytes into an allocation: no float can start there. The shape stays inside
// the buffer even from the shifted pointer, in case a launcher ran anyway.
TEST_P(StepArguments, RejectsInputNotFourByteAligned) {
  const auto* x = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x_.get()) + 2);
  expect_rejected([&] { GetParam().launch(x, y_.get(), kRows, kCols - 1, 0); },
                  "x is not 4-byte aligned");
}
TEST_P(StepArguments, RejectsOutputNotFourByteAligned) {
  auto* y = reinterpret_cast<float*>(reinterpret_cast<char*>(y_.get()) + 2);
  expect_rejected([&] { GetParam().launch(x_.get(), y, kRows, kCols - 1, 0); },
                  "y is not 4-byte aligned");
}
TEST_P(StepArguments, RejectsZeroRows) {
  expect_rejected([&] { GetParam().launch(x_.get(), y_.get(), 0, kCols, 0); }, "rows must be >= 1");
}
TEST_P(StepArguments, RejectsNegativeCols) {
  expect_rejected([&] { GetParam().launch(x_.get(), y_.get(), kRows, -5, 0); },
                  "cols must be >= 1");
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

INSTANTIATE_TEST_SUITE_P(AllSteps, StepArguments, ::testing::ValuesIn(all_implementations()),
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
