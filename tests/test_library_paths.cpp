// SPDX-License-Identifier: MIT
// The library's split paths one by one: every cluster size 2..16 (path g), groups of 2..200
// CTAs of a cooperative grid (path h), groups whose parts are half held in shared memory (path i,
// in CTAs of 512 and of 1024 threads) and clusters of such CTAs (change 44), every float4 count
// per thread, N % 4 in {0, 1, 2, 3}, x and y off 16-byte boundaries, the row's maximum or its only
// finite value at either end of the row (in the last CTA's part or its tail), more rows than
// clusters or groups (the persistent loop), and the launcher's own choice including rows longer
// than the GPU holds and the fallback paths with clusters turned off. Without a CUDA device each test reports SKIPPED; on a
// GPU without clusters (before sm_90) the forced-path tests report SKIPPED and the fallback test
// runs.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "common/data.h"
#include "common/step_table.h"
#include "common/verify.h"
#include "gpu_test.h"
#include "fastsoftmax/softmax.h"
#include "split.h"
#include "tile_plan.h"

namespace softmax {
namespace {

using fastsoftmax::detail::Split;
using fastsoftmax::detail::SplitPlan;

// A Step whose launcher runs one given split (path, K and CTA size), sized as the step would size
// it.
Split g_path = Split::kNone;
int g_parts = 0;
int g_threads = 512;
void forced_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  check_launch_args("fastsoftmax forced split", x, y, rows, cols, kNoColLimit);
  fastsoftmax::detail::launch_split(fastsoftmax::detail::make_split(g_path, g_parts, rows, cols, g_threads),
                               x, y, rows, cols, stream);
}
int no_limit() { return kNoColLimit; }
Traffic ideal(int) { return kIdealTraffic; }
const Step kForced{"fastsoftmax_forced_split", "one split path", forced_launch, no_limit, ideal};

struct Case {
  Split path;
  int parts, rows, cols, x_offset, y_offset;
  int threads = 512;
};

std::string case_name(const Case& c) {
  const char* path = c.path == Split::kCluster       ? "cluster"
                     : c.path == Split::kGrid        ? "grid"
                     : c.path == Split::kClusterHeld ? "clusterheld"
                                                     : "held";
  return std::string(path) + std::to_string(c.parts) +
         (c.threads == 512 ? "" : "t" + std::to_string(c.threads)) + "_" +
         std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_x" +
         std::to_string(c.x_offset) + "y" + std::to_string(c.y_offset);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // Every cluster size, 2 float4 a thread and N % 4 == 3, rows off 16-byte boundaries.
  for (int k = 2; k <= 16; ++k) out.push_back({Split::kCluster, k, 12, k * 4096 + 3, 1, 1});
  // Every float4 count per thread (1, 2, 4, 8) at every N % 4, for both paths.
  for (Split path : {Split::kCluster, Split::kGrid})
    for (int packs : {1, 2, 4, 8})
      for (int r = 0; r < 4; ++r)
        out.push_back({path, 4, 12, 4 * 2048 * packs - 4 + r, r == 0 ? 0 : 3, r == 0 ? 0 : 3});
  // (i): every float4 count per thread (registers, and as many held), every N % 4.
  for (int packs : {1, 2, 4, 8})
    for (int r = 0; r < 4; ++r)
      out.push_back(
          {Split::kHeld, 4, 12, 8 * 2048 * packs - 4 + r, r == 0 ? 0 : 3, r == 0 ? 0 : 3});
  // (i) in CTAs of 1024 threads: each part twice as long again.
  for (int packs : {1, 2, 4, 8})
    for (int r = 0; r < 4; ++r)
      out.push_back({Split::kHeld, 4, 12, 16 * 2048 * packs - 4 + r, r == 0 ? 0 : 3,
                     r == 0 ? 0 : 3, 1024});
  // Groups of many CTAs, and few groups (so each loops over several rows).
  for (int k : {2, 7, 33, 64, 128, 200}) out.push_back({Split::kGrid, k, 12, k * 2048 + 1, 2, 2});
  // More rows than clusters or groups fit at once: the persistent loop, the parity of the
  // cluster's exchange slots, the four barrier sets and three stages of (h) (10 and 4 rows a
  // group; 2 and 8 float4 a thread).
  out.push_back({Split::kCluster, 2, 300, 8192 + 2, 0, 0});
  out.push_back({Split::kCluster, 16, 40, 16 * 8192, 0, 0});
  // Rows for 8 or more rounds of clusters: a cluster per two rows, more clusters than fit at once
  // (14 clusters of 16 fit on an H100; 121 rows, the last cluster with one).
  out.push_back({Split::kCluster, 16, 121, 16 * 16384 + 3, 1, 1});
  out.push_back({Split::kGrid, 64, 40, 64 * 4096 + 3, 1, 1});
  out.push_back({Split::kGrid, 16, 30, 16 * 16384 + 1, 2, 2});
  // (i) over several rounds (5 and 4 rows a group), where a thread's held slots move with each
  // row's line_shift; parts with a few held slots; parts with none.
  out.push_back({Split::kHeld, 33, 40, 33 * 8192 + 3, 1, 1});
  out.push_back({Split::kHeld, 8, 100, 8 * 2048 * 4 + 1, 2, 2});
  out.push_back({Split::kHeld, 2, 12, 2 * 4096 * 4 + 4 * 100 + 2, 1, 1});
  out.push_back({Split::kHeld, 17, 40, 17 * 16384 + 3, 1, 1, 1024});  // 7 groups fit: 6 rounds
  out.push_back({Split::kHeld, 2, 12, 2 * 8192 * 4 + 4 * 100 + 2, 1, 1, 1024});
  // (g) with held parts (change 44), in CTAs of 512 and of 1024: every float4 count per thread at
  // every N % 4; every cluster size at 2 float4 a thread off the boundary; more rows than
  // clusters fit at once (a cluster per row: 30 rows in clusters of 16, of which 14 fit on an H100;
  // 20 in clusters of 16 CTAs of 1024, one an SM); parts with a few held slots, and with none.
  for (int packs : {1, 2, 4, 8})
    for (int r = 0; r < 4; ++r) {
      out.push_back(
          {Split::kClusterHeld, 4, 12, 8 * 2048 * packs - 4 + r, r == 0 ? 0 : 3, r == 0 ? 0 : 3});
      out.push_back({Split::kClusterHeld, 4, 12, 16 * 2048 * packs - 4 + r, r == 0 ? 0 : 3,
                     r == 0 ? 0 : 3, 1024});
    }
  for (int k = 2; k <= 16; ++k)
    out.push_back({Split::kClusterHeld, k, 12, k * 8192 * 2 + 3, 1, 1});
  out.push_back({Split::kClusterHeld, 16, 30, 16 * 16384 * 2 + 3, 1, 1});
  out.push_back({Split::kClusterHeld, 16, 20, 16 * 16384 * 4 - 4 + 1, 2, 2, 1024});
  out.push_back({Split::kClusterHeld, 10, 30, 300000, 0, 0});
  out.push_back({Split::kClusterHeld, 2, 12, 2 * 4096 * 4 + 4 * 100 + 2, 1, 1});
  out.push_back({Split::kClusterHeld, 8, 12, 7, 3, 3});
  out.push_back({Split::kClusterHeld, 8, 12, 7, 3, 3, 1024});
  // (g) in CTAs of 128 threads: every cluster size to 16 (2 float4 a thread, N % 4 == 3; 9-16
  // exchange two pairs a lane), every float4 count at every N % 4, many more rows than fit at
  // once (a cluster per two rows) and parts with no body slots.
  for (int k = 2; k <= 16; ++k) out.push_back({Split::kCluster, k, 12, k * 1024 + 3, 1, 1, 128});
  // Clusters of 9-16 on shapes change 28 takes: exact parts at K = 16 (16x65536), rows off their
  // boundary at the launcher's K = 9 (95x36005) and at K = 13 forced on 24x50001 (the launcher
  // gives it 16), staged; more rows than fit at once at K = 12.
  out.push_back({Split::kCluster, 16, 16, 65536, 0, 0, 128});
  out.push_back({Split::kCluster, 9, 95, 36005, 1, 1, 128});
  out.push_back({Split::kCluster, 13, 24, 50001, 2, 2, 128});
  out.push_back({Split::kCluster, 12, 300, 12 * 1024 * 4 - 1, 3, 3, 128});
  for (int packs : {1, 2, 4, 8})
    for (int r = 0; r < 4; ++r)
      out.push_back({Split::kCluster, 5, 12, 5 * 512 * packs - 4 + r, r == 0 ? 0 : 3,
                     r == 0 ? 0 : 3, 128});
  out.push_back({Split::kCluster, 8, 6000, 8 * 512 + 1, 2, 2, 128});
  out.push_back({Split::kCluster, 6, 3000, 6 * 512 * 2, 0, 0, 128});  // aligned rows, the same
  // Parts of exactly 128 threads' float4 (N = K * 512 * packs, aligned): no bounds checked.
  for (int packs : {1, 2, 4, 8})
    out.push_back({Split::kCluster, 4, 12, 4 * 512 * packs, 0, 0, 128});
  out.push_back({Split::kCluster, 8, 3000, 8 * 512 * 2, 0, 0, 128});
  // Matrices of 2 MiB and more: the rows start in stages (the stagger), aligned rows and not;
  // 2, 3 (the last stage shorter: 50 rows in stages of 17) and 8 stages.
  out.push_back({Split::kCluster, 8, 32, 16384, 0, 0, 128});
  out.push_back({Split::kCluster, 8, 60, 16387, 1, 1, 128});
  out.push_back({Split::kCluster, 8, 50, 16387, 3, 3, 128});
  out.push_back({Split::kCluster, 8, 64, 32771, 2, 2, 128});
  out.push_back({Split::kCluster, 8, 12, 21, 3, 3, 128});
  // Parts that get no body slots at all (a row shorter than K slots): only the edges matter.
  out.push_back({Split::kCluster, 8, 12, 21, 1, 1});
  out.push_back({Split::kGrid, 8, 12, 7, 3, 3});
  out.push_back({Split::kHeld, 8, 12, 7, 3, 3});
  out.push_back({Split::kHeld, 8, 12, 7, 3, 3, 1024});
  return out;
}

// One test per family of kernels (path and CTA size), each running every case of that family:
// a process per family rather than per case keeps the suite's start-up costs down.
struct Family {
  const char* name;
  Split path;
  int threads;
};
const Family kFamilies[] = {{"cluster", Split::kCluster, 512},
                            {"cluster_t128", Split::kCluster, 128},
                            {"grid", Split::kGrid, 512},
                            {"grid_held", Split::kHeld, 512},
                            {"grid_held_t1024", Split::kHeld, 1024},
                            {"cluster_held", Split::kClusterHeld, 512},
                            {"cluster_held_t1024", Split::kClusterHeld, 1024}};

class LibrarySplit : public testing::GpuTest<::testing::TestWithParam<Family>> {};

TEST_P(LibrarySplit, MatchesReference) {
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  const Family& f = GetParam();
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.path != f.path || c.threads != f.threads) continue;
    ++checked;
    g_path = c.path;
    g_parts = c.parts;
    g_threads = c.threads;
    ::testing::Test::RecordProperty(
        case_name(c), fastsoftmax::detail::describe(fastsoftmax::detail::make_split(
                          c.path, c.parts, c.rows, c.cols, c.threads)));
    for (InputKind kind : {InputKind::kNormal, InputKind::kNonFinite, InputKind::kMaxAtEnds,
                           InputKind::kOneFiniteAtEnds}) {
      const VerifyResult r =
          check_step(kForced, c.rows, c.cols, kind, next_seed(), {c.x_offset, c.y_offset});
      EXPECT_TRUE(r.ok()) << case_name(c) << " " << to_string(kind) << ": " << r.report();
    }
  }
  EXPECT_GT(checked, 0) << f.name << ": no case";
}

// CTest names: fastsoftmax/LibrarySplit.MatchesReference/cluster and so on.
INSTANTIATE_TEST_SUITE_P(fastsoftmax, LibrarySplit, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& info) {
                           return std::string(info.param.name);
                         });

struct RowsCols {
  int rows, cols;
};

// step08 against the reference at each shape, for every input kind, with x and y both `offset`
// floats past their 16-byte boundary for each offset given.
// The launcher's plan for rows x cols, recorded in the test's XML output ("ROWSxCOLS": the plan).
SplitPlan recorded_plan(int rows, int cols) {
  const SplitPlan plan = fastsoftmax::detail::plan_split(rows, cols);
  ::testing::Test::RecordProperty(std::to_string(rows) + "x" + std::to_string(cols),
                                  fastsoftmax::detail::describe(plan));
  return plan;
}

void expect_every_kind_matches(const std::vector<RowsCols>& shapes,
                               std::initializer_list<int> offsets) {
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  for (const RowsCols s : shapes)
    for (InputKind kind : kAllInputKinds)
      for (const int offset : offsets) {
        const VerifyResult r =
            check_step(*step, s.rows, s.cols, kind, next_seed(), {offset, offset});
        EXPECT_TRUE(r.ok()) << s.rows << "x" << s.cols << " x+" << offset << " "
                            << to_string(kind) << ": " << r.report();
      }
}

// The launcher's own choice on shapes that reach each of its branches, at every pair of x and y
// offsets for one of them (offsets that differ modulo 4 floats go to step07's 4-byte path f).
class LibraryDispatch : public testing::GpuTest<> {};

TEST_F(LibraryDispatch, EveryBranchMatchesReference) {
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  struct Shape {
    int rows, cols;
  };
  // 2x1048579: few long rows (grid); 40x131075: a cluster of 8; 48x262147: clusters of 16;
  // 300x32771: clusters of 2; 8x1048579: few long rows that (h) would take in two rounds (held);
  // 1x4400003 and 3x5000001: longer than (h) holds on the whole GPU (held in CTAs of 1024, in
  // one and three rounds; 1x8650755 the longest that holds on an H100, in 132 of them);
  // 1x9000001: longer than the GPU holds with the stages too (two passes); 16x20000: few mid rows
  // (clusters of 128 threads since change 18);
  // 6x1000003: held over every resident CTA (44 a row on an H100); 50x50001: clusters no wider
  // than one round allows (4 on an H100); 16x262147: grid groups of 16 in one round, where
  // clusters of 16 would take two; 140x20001: step07's path (d) past one round of clusters of 2;
  // 262147x1: rows of one float (a1); 1x12729, 20x16387, 32x16384 and 8x32771: small matrices
  // of few rows in clusters of CTAs of 128 threads (change 18); 117x36005: step07's path (d)
  // past one round of clusters of 3 (change 29); 70x60001: path (i) in 3 CTAs a row past one round
  // of clusters of 4 (change 30); 40x524291 and 96x700001: (g) with held parts in CTAs of 512
  // and of 1024 (change 44).
  for (const Shape s : {Shape{2, 1048579}, Shape{40, 131075}, Shape{48, 262147},
                        Shape{300, 32771}, Shape{8, 1048579}, Shape{1, 4400003},
                        Shape{3, 5000001}, Shape{1, 8650755}, Shape{1, 9000001},
                        Shape{16, 20000}, Shape{6, 1000003}, Shape{50, 50001},
                        Shape{16, 262147}, Shape{140, 20001}, Shape{262147, 1},
                        Shape{1, 12729}, Shape{20, 16387}, Shape{32, 16384}, Shape{8, 32771},
                        Shape{117, 36005}, Shape{70, 60001}, Shape{40, 524291},
                        Shape{96, 700001}}) {
    ::testing::Test::RecordProperty(
        std::to_string(s.rows) + "x" + std::to_string(s.cols),
        fastsoftmax::detail::describe(fastsoftmax::detail::plan_split(s.rows, s.cols)));
    for (InputKind kind : {InputKind::kNormal, InputKind::kMaxAtEnds}) {
      const VerifyResult r = check_step(*step, s.rows, s.cols, kind, next_seed(), {1, 1});
      EXPECT_TRUE(r.ok()) << s.rows << "x" << s.cols << " " << to_string(kind) << ": "
                          << r.report();
    }
  }
  for (int xo = 0; xo < 4; ++xo)
    for (int yo = 0; yo < 4; ++yo) {
      const VerifyResult r = check_step(*step, 3, 300001, InputKind::kMaxAtEnds, next_seed(),
                                        {xo, yo});
      EXPECT_TRUE(r.ok()) << "3x300001 x+" << xo << " y+" << yo << ": " << r.report();
    }
}

// (g) with held parts (change 44): rows of up to 2 MiB on many rows, where (h) would count its
// pairs (more than four rows a group, more than three groups), in the fewest CTAs of 512 that hold
// a row, a cluster per row; rows of 2-4 MiB in clusters of 16 CTAs of 1024 from 96 rows where at
// most six groups of (h) fit. Few rows keep (h) or (i).
TEST_F(LibraryDispatch, HeldClustersOnManyLongRows) {
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  const SplitPlan a = fastsoftmax::detail::plan_split(256, 524288);
  EXPECT_EQ(a.path, Split::kClusterHeld);
  EXPECT_EQ(a.parts, 16);
  EXPECT_EQ(a.threads, 512);
  EXPECT_EQ(a.groups, 256);
  EXPECT_EQ(fastsoftmax::detail::plan_split(600, 300000).path, Split::kClusterHeld);
  EXPECT_EQ(fastsoftmax::detail::plan_split(600, 300000).parts, 10);
  EXPECT_EQ(fastsoftmax::detail::plan_split(16, 524289).path, Split::kHeld);  // (i) in one round
  // Where (h)'s groups of 64 count their pairs in at most six groups (four on an H100).
  const SplitPlan h = fastsoftmax::detail::make_split(Split::kGrid, 64, 128, 1048576);
  if (!h.tagged && h.groups <= 6) {
    const SplitPlan b = fastsoftmax::detail::plan_split(128, 1048576);
    EXPECT_EQ(b.path, Split::kClusterHeld);
    EXPECT_EQ(b.parts, 16);
    EXPECT_EQ(b.threads, 1024);
    EXPECT_EQ(fastsoftmax::detail::plan_split(95, 1048576).path, Split::kGrid);
  }
  // Rows of 600000 floats: seven groups of (h) fit on an H100, and (h) stays.
  if (fastsoftmax::detail::make_split(Split::kGrid, 37, 256, 600000).groups == 7)
    EXPECT_EQ(fastsoftmax::detail::plan_split(256, 600000).path, Split::kGrid);
}

// (g) with held parts on 384 rows or more of 10-16 CTAs' worth of (g) (change 52): half as many
// CTAs a row, a cluster per row. Either side of both bounds (383 rows; clusters of 9 and of 8
// stay), and one shape against the reference.
TEST_F(LibraryDispatch, HeldClustersOnManyRowsOfTenToSixteenCtas) {
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  const SplitPlan a = recorded_plan(384, 180000);
  EXPECT_EQ(a.path, Split::kClusterHeld);
  EXPECT_EQ(a.parts, 6);
  EXPECT_EQ(a.threads, 512);
  EXPECT_EQ(a.groups, 384);
  const SplitPlan b = recorded_plan(512, 262144);
  EXPECT_EQ(b.path, Split::kClusterHeld);
  EXPECT_EQ(b.parts, 8);
  EXPECT_EQ(recorded_plan(2048, 160000).path, Split::kClusterHeld);  // 10 CTAs' worth
  EXPECT_EQ(recorded_plan(2048, 160000).parts, 5);
  const SplitPlan c = recorded_plan(383, 180000);
  EXPECT_EQ(c.path, Split::kCluster);
  EXPECT_EQ(c.parts, 11);
  EXPECT_EQ(recorded_plan(2048, 147457).path, Split::kCluster);  // 9 CTAs' worth
  EXPECT_EQ(recorded_plan(2048, 147457).parts, 9);
  EXPECT_EQ(recorded_plan(1024, 131072).path, Split::kCluster);  // 8
  EXPECT_EQ(recorded_plan(1024, 131072).parts, 8);
  expect_every_kind_matches({{384, 180003}}, {1});
}

// (g) in CTAs of 512 over 2-8 rounds (change 53): every cluster that fits where the last round
// would be at most half full, the balanced count past that; from 8 rounds a cluster per two rows.
// The fit is found through make_split (the most rows it gives one round), so the bounds
// hold on any GPU with clusters; on 132 SMs the shapes that decided the rule; and one shape whose
// clusters take unequal numbers of rows against the reference.
TEST_F(LibraryDispatch, ClustersFillTheGpuWhereTheLastRoundIsAtMostHalfFull) {
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  const auto groups = [](int parts, int rows, int cols) {
    return fastsoftmax::detail::make_split(Split::kCluster, parts, rows, cols).groups;
  };
  struct Clusters {
    int parts, cols;
  };
  for (const Clusters s : {Clusters{2, 24869}, Clusters{4, 60715}, Clusters{16, 262144}}) {
    const int parts = s.parts;
    int fit = 1;
    while (fit < 4096 && groups(parts, fit + 1, s.cols) == fit + 1) ++fit;
    ASSERT_LT(fit, 4096) << "clusters of " << parts;
    const std::string at = "clusters of " + std::to_string(parts) + ", " +
                           std::to_string(fit) + " fit, rows ";
    EXPECT_EQ(groups(parts, fit + 1, s.cols), fit) << at << fit + 1;
    EXPECT_EQ(groups(parts, fit + fit / 2, s.cols), fit) << at << fit + fit / 2;
    const int past_half = fit + fit / 2 + 1;  // two rounds, balanced
    EXPECT_EQ(groups(parts, past_half, s.cols), (past_half + 1) / 2) << at << past_half;
    EXPECT_EQ(groups(parts, 3 * fit + 1, s.cols), fit) << at << 3 * fit + 1;
    EXPECT_EQ(groups(parts, 4 * fit - 1, s.cols), fit) << at << 4 * fit - 1;  // balanced: all
    EXPECT_EQ(groups(parts, 8 * fit, s.cols), 4 * fit) << at << 8 * fit;      // two rows each
  }
  if (query_device().sm_count == 132) {
    const SplitPlan a = recorded_plan(265, 24869);
    EXPECT_EQ(a.path, Split::kCluster);
    EXPECT_EQ(a.parts, 2);
    EXPECT_EQ(a.groups, 132);
    EXPECT_EQ(recorded_plan(150, 60715).groups, 62);   // clusters of 4, 2.4 rounds
    EXPECT_EQ(recorded_plan(100, 60715).groups, 50);   // 1.6 rounds: balanced
    EXPECT_EQ(recorded_plan(64, 262144).groups, 13);   // clusters of 16, 4.6 rounds: balanced
  }
  expect_every_kind_matches({{265, 24871}}, {1});
}

// Rows of 5-16 CTAs' worth that clusters would take in three rounds or more: path (i) in the
// fewest CTAs that hold a row, where that takes every row in one round (change 45); over two
// rounds the clusters stay. Rows of 2 CTAs' worth past one round: clusters of 2 where two blocks
// of step07's path (d) no longer fit an SM (changes 46 and 48). On any GPU a plan of (i) takes
// every row at once; on an H100 or H200 (132 SMs) the shapes that decided the rule, either side
// of it; and two of them against the reference.
TEST_F(LibraryDispatch, HeldInOneRoundPastTwoRoundsOfClusters) {
  const DeviceInfo dev = query_device();
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  for (const RowsCols s : {RowsCols{33, 262144}, RowsCols{48, 151936}, RowsCols{32, 200000},
                           RowsCols{40, 180001}, RowsCols{64, 128256}, RowsCols{84, 90000}}) {
    const SplitPlan plan = recorded_plan(s.rows, s.cols);
    if (plan.path == Split::kHeld) {
      EXPECT_LE(int64_t(s.rows) * plan.parts, 2 * dev.sm_count) << s.rows << "x" << s.cols;
      EXPECT_EQ(plan.groups, s.rows) << s.rows << "x" << s.cols;
    }
    if (dev.sm_count == 132) {
      EXPECT_EQ(plan.path, Split::kHeld) << s.rows << "x" << s.cols;
      // The fewest CTAs that hold a row; on at most 32 rows every resident CTA (change 50).
      EXPECT_EQ(plan.parts, s.rows <= 32 ? 2 * dev.sm_count / s.rows : (s.cols / 4 + 8191) / 8192)
          << s.rows << "x" << s.cols;
    }
  }
  // Rows of 2 CTAs' worth past one round of clusters of 2: clusters of 2 where two blocks of
  // step07's path (d) no longer fit an SM (past 7208 slots on an H100), (d) below
  // (changes 46 and 48).
  if (dev.sm_count == 132) {
    EXPECT_EQ(fastsoftmax::detail::plan_split(256, 32000).path, Split::kCluster);
    EXPECT_EQ(fastsoftmax::detail::plan_split(256, 32000).parts, 2);
    EXPECT_EQ(fastsoftmax::detail::plan_split(200, 30000).path, Split::kCluster);
    EXPECT_EQ(fastsoftmax::detail::plan_split(240, 24000).path, Split::kNone);
    EXPECT_EQ(fastsoftmax::detail::plan_split(200, 28800).path, Split::kNone);    // 7200 slots
    EXPECT_EQ(fastsoftmax::detail::plan_split(200, 29000).path, Split::kCluster);  // 7250 slots
    // Rows of up to 4750 slots keep (d) over up to two waves of its blocks (change 51).
    EXPECT_EQ(fastsoftmax::detail::plan_split(436, 16396).path, Split::kNone);
    EXPECT_EQ(fastsoftmax::detail::plan_split(300, 19000).path, Split::kNone);
    EXPECT_EQ(fastsoftmax::detail::plan_split(528, 16388).path, Split::kNone);
    EXPECT_EQ(fastsoftmax::detail::plan_split(529, 16388).path, Split::kCluster);
    EXPECT_EQ(fastsoftmax::detail::plan_split(300, 19004).path, Split::kCluster);  // 4751 slots
    EXPECT_EQ(fastsoftmax::detail::plan_split(600, 17000).path, Split::kCluster);
  }
  // The bound is where two blocks of (d) stop fitting an SM (change 48), as the occupancy
  // calculator counts them.
  const int64_t pair = fastsoftmax::detail::path_d_pair_slots();
  EXPECT_GE(fastsoftmax::detail::path_d_blocks_per_sm(pair), 2) << pair << " slots";
  EXPECT_EQ(fastsoftmax::detail::path_d_blocks_per_sm(pair + 1), 1) << pair + 1 << " slots";
  if (dev.sm_count == 132) {
    EXPECT_EQ(fastsoftmax::detail::plan_split(50, 128256).path, Split::kCluster);  // two rounds
    EXPECT_EQ(fastsoftmax::detail::plan_split(34, 262144).path, Split::kCluster);  // 272 CTAs of (i)
    // 24x256000, clusters of 16 over two rounds before change 50: (i) over every resident CTA.
    EXPECT_EQ(fastsoftmax::detail::plan_split(24, 256000).path, Split::kHeld);
    EXPECT_EQ(fastsoftmax::detail::plan_split(24, 256000).parts, 11);
  }
  expect_every_kind_matches({{33, 262147}, {40, 180001}, {256, 32000}, {436, 16397}}, {0, 1});
}

// Few rows of a small matrix spread wide (change 47): rows of at most 8 CTAs' worth in clusters
// of 16 on at most seven rows (on more, clusters of up to 8); rows past 16 CTAs' worth (grid
// groups) over one CTA an SM, in parts of 512-1024 slots and at most 128 of them (one round trip
// of the tagged exchange), where that is wider than up to two CTAs an SM in parts of at least
// 2048. The shapes either side, and some of them against the reference.
TEST_F(LibraryDispatch, FewRowsSpreadWide) {
  const DeviceInfo dev = query_device();
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  for (const RowsCols s : {RowsCols{1, 128256}, RowsCols{4, 80000}, RowsCols{7, 80000},
                           RowsCols{8, 80000}, RowsCols{8, 100000}, RowsCols{1, 151936},
                           RowsCols{1, 256003}, RowsCols{8, 151936}, RowsCols{2, 262144},
                           RowsCols{3, 200000}, RowsCols{1, 300001},
                           RowsCols{1, 524288}, RowsCols{1, 1048576}})
    recorded_plan(s.rows, s.cols);
  if (dev.sm_count == 132) {
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 128256).path, Split::kCluster);
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 128256).parts, 16);
    EXPECT_EQ(fastsoftmax::detail::plan_split(4, 80000).parts, 16);
    EXPECT_EQ(fastsoftmax::detail::plan_split(7, 80000).parts, 16);
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 80000).parts, 8);
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 100000).parts, 8);
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 151936).path, Split::kGrid);
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 151936).parts, 75);   // 37984 slots / 512
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 256003).parts, 125);  // 64000 slots / 512
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 256003).packs, 1);
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 151936).path, Split::kHeld);  // change 50
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 151936).parts, 33);
    EXPECT_EQ(fastsoftmax::detail::plan_split(2, 262144).parts, 66);   // 65536 slots / 66: 993
    EXPECT_EQ(fastsoftmax::detail::plan_split(3, 200000).parts, 25);   // 44 would be parts of 1137
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 300001).parts, 128);  // not 132: one round trip
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 524288).parts, 128);
    EXPECT_EQ(fastsoftmax::detail::plan_split(1, 1048576).parts, 128);  // 132 would be parts of 1986
  }
  expect_every_kind_matches({{1, 128259}, {4, 80003}, {1, 151939}, {1, 256003}}, {0, 3});
}

// 8-32 rows of 16K-64K slots (change 50): (i) over every resident CTA, two an SM, where its parts
// come to more than 1024 slots and the plan before took fewer CTAs a row or more than one round.
// The shapes either side, and some of them against the reference.
TEST_F(LibraryDispatch, FewRowsOverEveryCta) {
  const DeviceInfo dev = query_device();
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  const RowsCols taken[] = {{16, 128256}, {16, 100000}, {8, 151936}, {20, 256000},
                            {32, 151936}, {12, 128259}};
  const RowsCols kept[] = {{7, 128256},  {8, 100000},  {10, 100000}, {16, 151936},
                           {32, 128256}, {33, 128256}, {16, 65536},  {64, 128256}};
  for (const RowsCols s : taken) {
    const SplitPlan plan = recorded_plan(s.rows, s.cols);
    EXPECT_EQ(plan.path, Split::kHeld) << s.rows << "x" << s.cols;
    EXPECT_EQ(plan.parts, std::min(128, 2 * dev.sm_count / s.rows)) << s.rows << "x" << s.cols;
    EXPECT_EQ(plan.groups, s.rows) << s.rows << "x" << s.cols;  // one round
  }
  for (const RowsCols s : kept) {
    const SplitPlan plan = recorded_plan(s.rows, s.cols);
    EXPECT_FALSE(plan.path == Split::kHeld && plan.threads == 512 &&
                 plan.parts == 2 * dev.sm_count / s.rows && plan.parts > 8)
        << s.rows << "x" << s.cols << ": " << fastsoftmax::detail::describe(plan);
  }
  if (dev.sm_count == 132) {
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 100000).path, Split::kCluster);  // parts of 758 slots
    EXPECT_EQ(fastsoftmax::detail::plan_split(16, 151936).path, Split::kGrid);    // (h) in 16 already
    EXPECT_EQ(fastsoftmax::detail::plan_split(32, 128256).path, Split::kGrid);    // (h) in 8 already
    EXPECT_EQ(fastsoftmax::detail::plan_split(7, 128256).parts, 16);              // change 47
  }
  expect_every_kind_matches({{16, 128259}, {8, 151939}, {20, 256003}, {12, 100001}}, {0, 1});
}

// One or two rows of more than 128 CTAs' worth of (h)'s widest spread (change 49): groups of at
// most 128 CTAs, whose pairs the tagged exchange reads in one round trip; where (h) needs more
// than 128 a row and (i) at most 128, (i) in 128.
TEST_F(LibraryDispatch, GroupsOfOneRoundTrip) {
  const DeviceInfo dev = query_device();
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  for (const RowsCols s : {RowsCols{1, 1100000}, RowsCols{1, 1500000}, RowsCols{1, 2000000},
                           RowsCols{1, 3000000}, RowsCols{2, 1500000}, RowsCols{2, 2200000}}) {
    const SplitPlan plan = recorded_plan(s.rows, s.cols);
    EXPECT_LE(plan.parts, 128) << s.rows << "x" << s.cols;
    if (dev.sm_count == 132) {
      EXPECT_EQ(plan.parts, 128) << s.rows << "x" << s.cols;
      const bool held = s.cols >= 2200000;
      EXPECT_EQ(plan.path, held ? Split::kHeld : Split::kGrid) << s.rows << "x" << s.cols;
    }
  }
  expect_every_kind_matches({{1, 1100003}, {1, 3000001}, {2, 2200001}}, {0, 1});
}

// A warp per aligned row of 56-64 slots (path b, N = 224-256) where path (b4) gives way to it, and
// either side of the waves that change 22's rule counts. On an H100 (b4) takes these rows up to
// one wave of its warps (8448) and under 64 KB an SM: 8448 rows of 224 and 228 floats and 8447 of
// 256 are its, one row more is not. Past that, rows of 57-64 slots (N = 228, 256) take one row
// per warp (change 22: from 0.75 waves of blocks, so from where (b4) leaves off), and rows of 56
// slots (N = 224) the persistent grid with the next row in flight (8449, 12600 rows) up to 1.5
// waves, one row per warp from there (12673).
TEST_F(LibraryDispatch, WarpRowsEitherSideOfTheWaveRule) {
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  for (const int rows : {8447, 8448, 8449, 12600, 12673})
    for (const int cols : {256, 228, 224})
      for (InputKind kind : {InputKind::kNormal, InputKind::kMaxAtEnds}) {
        const VerifyResult r = check_step(*step, rows, cols, kind, next_seed(), {0, 0});
        EXPECT_TRUE(r.ok()) << rows << "x" << cols << " " << to_string(kind) << ": "
                            << r.report();
      }
}

// A warp per row at 4 slots a lane (path b, N = 388-515) on either side of change 23's rule. On an
// H100 (12 blocks of one row per warp an SM): unaligned rows, and aligned ones off a 16-byte
// boundary, take the persistent grid with the next row in flight from 0.9 waves of blocks (5701
// rows) to 1.5 (from 9501 rows one row per warp), and without it below; aligned rows the
// persistent grid without it below 1.5 waves (9501 rows), as step07 (both sides of one wave,
// 6333 rows, where a rule tried for them was not kept). Every shape here is past path (b4)'s
// reach (64 KB of input an SM; 4500x515 is 9.3 MB).
TEST_F(LibraryDispatch, WarpRowsAtFourSlotsEitherSideOfTheWaveRule) {
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  struct Case {
    int rows, cols, offset;
  };
  for (const Case c : {Case{6332, 512, 0}, Case{6333, 400, 0}, Case{7168, 448, 0},
                       Case{5700, 509, 0}, Case{5701, 450, 0}, Case{8191, 509, 0},
                       Case{9502, 389, 0}, Case{6144, 448, 1}, Case{4500, 515, 2}})
    for (InputKind kind : {InputKind::kNormal, InputKind::kMaxAtEnds}) {
      const VerifyResult r =
          check_step(*step, c.rows, c.cols, kind, next_seed(), {c.offset, c.offset});
      EXPECT_TRUE(r.ok()) << c.rows << "x" << c.cols << " x+" << c.offset << " " << to_string(kind)
                          << ": " << r.report();
    }
}

// A warp per row at 2-6 float4 a lane (path b), aligned and one float off its 16-byte boundary:
// the last pack full (N = 256, 384, 640), of 18 and 11 lanes (N = 200, 300), of 1 lane (N = 132,
// 644); row counts that leave warps of the persistent grid one row or two (the next row in flight
// at 4096-9001 rows, 8448x256 off its boundary too) and one row a warp (8448x256 on its boundary,
// change 22's rule; 16385x256); all past path (b4)'s reach on an H100 (more rows than one wave of
// its warps, or 64 KB of input an SM); every input kind (rows of only -inf, NaN and +inf among
// them). Written for change 31, which was not kept (docs/notes/tuning.md, step08); the shapes
// moved past (b4) in change 33.
TEST_F(LibraryDispatch, WarpRowsAtTwoToSixPacks) {
  expect_every_kind_matches({{9000, 200}, {9001, 132}, {8448, 256}, {16385, 256}, {6000, 384},
                             {7300, 300}, {4096, 640}, {4097, 644}},
                            {0, 1});
}

// Path (b4), a warp per row in 4-byte accesses, on matrices loaded all at once (under 31 KB of
// input an SM, or under 64 KB with a warp resident for every row; on an H100 or H200, fewer SMs
// move the bounds): the shortest and longest rows it takes (33, whose last stride fills one lane,
// and 1024), rows whose last stride fills all lanes (256) or part of them (61, 100, 190, 257, 700,
// 766, 999, 1001); one row, a few, a last block of one or two rows, either side of the rule that
// leaves 1-7 rows of more than 768 floats to path (b) (7x1024, 3x1001 there; 8x1024, 8x1001,
// 7x766 here), either side of the rule that leaves more than 32 rows an SM of 33-64 floats to
// step07's paths (4224 and 4225 rows of 61 on 132 SMs), the most rows under each byte bound with
// one more beside it (on another path but at 1023x1024, which the second bound takes), and either
// side of one wave of warps at 128 floats (8448 on 132 SMs: the 4.3 MB of 8448x128 are past 31 KB
// an SM, under 64); every input kind; x and y on their 16-byte boundary and 1 and 3 floats off it
// (the path asks nothing of alignment).
TEST_F(LibraryDispatch, StridedRowsOnSmallMatrices) {
  const int64_t sms = query_device().sm_count;
  const auto most_rows = [&](int64_t kb, int cols) {
    return int((kb * 1024 * sms - 1) / (4 * int64_t(cols)));
  };
  const int waves = 64 * int(sms);  // warps of the kernel at 128 floats a row (full occupancy)
  expect_every_kind_matches({{1, 33}, {7, 33}, {7, 1024}, {8, 1024}, {3, 1001}, {8, 1001},
                             {7, 766}, {1, 700}, {1000, 999}, {2777, 190}, {2049, 256},
                             {6144, 257}, {32 * int(sms), 61}, {32 * int(sms) + 1, 61},
                             {most_rows(31, 100), 100}, {most_rows(31, 100) + 1, 100},
                             {most_rows(31, 1024), 1024}, {most_rows(31, 1024) + 1, 1024},
                             {most_rows(64, 1024), 1024}, {most_rows(64, 1024) + 1, 1024},
                             {most_rows(64, 256), 256}, {most_rows(64, 256) + 1, 256},
                             {waves, 128}, {waves + 1, 128}},
                            {0, 1, 3});
}

// Path (a) in groups of 16 lanes, one row each, on unaligned rows of 69-131 floats at 0.7 to 1.1
// waves of its blocks (change 35, half_warp_rows), from 0.55 waves at 69-85 floats (change 37):
// on an H100 (16 blocks an SM) rows 11825 to 18584 at 86-131 floats and 9289 to 18584 at 69-85;
// 9288x69, 11824x86 and 18585x131 take the paths they took before ((b4) at the first two, the
// tiles a' at the last). The shortest and longest rows the rule takes (69, 131) and rows between
// (70, 85, 86, 101, 127), the first and last row counts inside the band and one outside each end,
// at both lower edges; every input kind; x and y on their 16-byte boundary and 1 and 3 floats off
// it (each row's head and tail differ).
TEST_F(LibraryDispatch, HalfWarpRowsAroundOneWave) {
  expect_every_kind_matches({{9288, 69}, {9289, 69}, {11824, 85}, {11824, 86}, {11825, 86},
                             {12000, 70}, {15000, 101}, {15000, 127}, {18584, 131}, {18585, 131}},
                            {0, 1, 3});
}

// Path (a) in groups of 16 lanes, one row each, on aligned rows of 72-124 floats at 0.8 to 1.05
// waves of its blocks (change 38, half_warp_aligned_rows): on an H100 rows 13513 to 17736 (at 72
// and 76 floats only past 31 KB of input an SM, (b4) below); 13512 and 17737 rows, and rows of 128
// floats, keep groups of 8 lanes. 13513x80 and 17736x124 inside, 13512x96 and 17737x124 outside,
// 15000x116 between and 15000x128 too long;
// every input kind; x and y on their 16-byte boundary (the rule) and 1 and 3 floats off it (not
// the rule: those rows are unaligned).
TEST_F(LibraryDispatch, HalfWarpAlignedRowsAroundOneWave) {
  expect_every_kind_matches({{13512, 96}, {13513, 80}, {15000, 116}, {17736, 124}, {17737, 124},
                             {15000, 128}},
                            {0, 1, 3});
}

// Path (b4) on unaligned rows of 86-131 floats past its own reach and below change 35's band
// (change 36, strided_below_band): on an H100 from 8449 rows at 127-131 floats (up to 8448, one
// wave of its warps, strided_reach gives them b4 already, as at 8100x131 here) and from 11264 at
// 93, up to 11824 rows; 11825 rows take the 16-lane groups. The rule at 9300x113, 11500x93 and
// 11824x127 (the last row count below the band), and 11825x127 (the first in it); every input
// kind; x and y on their 16-byte boundary and 1 and 3 floats off it.
TEST_F(LibraryDispatch, StridedRowsBelowTheHalfWarpBand) {
  expect_every_kind_matches({{8100, 131}, {9300, 113}, {11500, 93}, {11824, 127}, {11825, 127}},
                            {0, 1, 3});
}

// A block of 128 threads per row (path c, N = 1156-8195) on either side of change 25's rule: with
// at most one row an SM the chain of one barrier (each warp's own pair, merged behind one
// barrier), with one more row step07's two block reductions; unaligned rows of 8-10 slots a
// thread (4099, 4147, 5003 floats, and 4096 off its boundary) keep the two reductions at any row
// count (change 39). Every input kind (rows of only -inf, NaN and +inf among them, the maximum or
// the only finite value at either end), aligned rows and rows off their 16-byte boundary, on both
// sides.
TEST_F(LibraryDispatch, BlockRowsEitherSideOfTheOneBarrierRule) {
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  const int sms = query_device().sm_count;
  for (const int rows : {1, sms, sms + 1})
    for (const int cols : {1157, 1536, 2051, 4096, 4099, 4147, 5003, 8190})
      for (InputKind kind : kAllInputKinds)
        for (const int offset : {0, 1, 3}) {
          const VerifyResult r =
              check_step(*step, rows, cols, kind, next_seed(), {offset, offset});
          EXPECT_TRUE(r.ok()) << rows << "x" << cols << " x+" << offset << " " << to_string(kind)
                              << ": " << r.report();
        }
}

// Tiles (a') for unaligned rows of 2-16 floats start at a number of tiles per SM that depends on
// the length (change 40, tile_plan.h's tile_start_tenths): on an H100, 2.5 tiles an SM at 14
// floats (330 tiles of 256 rows, from 84,225 rows), 2.8 at 7 (370 of 512, from 188,929), 4.1 at 9
// (542 of 256, from 138,497), 6.8 at 6 (898 of 512, from 459,265). The row counts on either side
// of each for the SMs of the GPU it runs on (the most with one tile too few, and one row more),
// every input kind, x and y on their 16-byte boundary and 1 float off it.
TEST_F(LibraryDispatch, TilesOfShortRowsEitherSideOfTheirStart) {
  const int sms = query_device().sm_count;
  std::vector<RowsCols> shapes;
  for (const int cols : {14, 7, 9, 6}) {
    const int per_tile = fastsoftmax::detail::tile_rows(cols, 1);
    const int64_t tiles =
        (int64_t(fastsoftmax::detail::tile_start_tenths(cols)) * sms + 9) / 10;  // the fewest
    ASSERT_FALSE(fastsoftmax::detail::use_tiles((tiles - 1) * per_tile, cols, sms)) << cols;
    ASSERT_TRUE(fastsoftmax::detail::use_tiles((tiles - 1) * per_tile + 1, cols, sms)) << cols;
    shapes.push_back({static_cast<int>((tiles - 1) * per_tile), cols});
    shapes.push_back({static_cast<int>((tiles - 1) * per_tile + 1), cols});
  }
  expect_every_kind_matches(shapes, {0, 1});
}

// Tiles (a') for aligned rows of an odd number of float4 (N % 8 == 4, 20-124 floats), from 5.9
// tiles per SM (change 41, use_aligned_tiles): on an H100 779 tiles, from 99,585 rows of 20 floats
// (128 rows a tile), 49,793 of 36 (64) and 24,897 of 68 and 124 (32). The row counts on either
// side for the GPU it runs on, every input kind, x and y on their 16-byte boundary (the rule) and
// 1 float off it (unaligned rows: use_tiles decides). Rows of 12 floats and of N % 8 == 0 keep
// path (a) at any row count. The rule is checked through takes_tiles, the launcher's own choice.
TEST_F(LibraryDispatch, AlignedTilesEitherSideOfTheirStart) {
  const int sms = query_device().sm_count;
  std::vector<RowsCols> shapes;
  for (const int cols : {20, 36, 68, 124}) {
    const int per_tile = fastsoftmax::detail::tile_rows(cols, fastsoftmax::detail::tile_group(cols));
    const int64_t tiles = (int64_t(59) * sms + 9) / 10;  // the fewest
    ASSERT_FALSE(fastsoftmax::detail::takes_tiles(true, (tiles - 1) * per_tile, cols, sms)) << cols;
    ASSERT_TRUE(fastsoftmax::detail::takes_tiles(true, (tiles - 1) * per_tile + 1, cols, sms)) << cols;
    // The same rows off their boundary are unaligned: the start of use_tiles (2.5 an SM) holds.
    ASSERT_TRUE(fastsoftmax::detail::takes_tiles(false, (tiles - 1) * per_tile, cols, sms)) << cols;
    shapes.push_back({static_cast<int>((tiles - 1) * per_tile), cols});
    shapes.push_back({static_cast<int>((tiles - 1) * per_tile + 1), cols});
  }
  for (const int cols : {12, 16, 40, 64, 128})
    EXPECT_FALSE(fastsoftmax::detail::takes_tiles(true, 10000000, cols, sms)) << cols;
  expect_every_kind_matches(shapes, {0, 1});
}

// Rows of two floats take path (a2) where x lies on an 8-byte boundary (x + 0 or + 2 floats past a
// 16-byte one) and 2M fits in an int, at any number of rows, below the tiles' start and past it;
// off that boundary, and at other lengths, they do not. The launcher's own choice (takes_pairs).
TEST(LibraryRules, PairsOnAnEightByteBoundary) {
  const uintptr_t base = 0x7f0000000000;  // a 256-byte boundary, as cudaMalloc gives
  for (const int64_t rows : {int64_t(1), int64_t(81462), int64_t(700000), int64_t(30000000)}) {
    EXPECT_TRUE(fastsoftmax::detail::takes_pairs(base, rows, 2)) << rows;
    EXPECT_TRUE(fastsoftmax::detail::takes_pairs(base + 8, rows, 2)) << rows;
    EXPECT_FALSE(fastsoftmax::detail::takes_pairs(base + 4, rows, 2)) << rows;
    EXPECT_FALSE(fastsoftmax::detail::takes_pairs(base + 12, rows, 2)) << rows;
    for (const int cols : {1, 3, 4, 6}) EXPECT_FALSE(fastsoftmax::detail::takes_pairs(base, rows, cols));
  }
  const int64_t most = std::numeric_limits<int>::max() / 2;
  EXPECT_TRUE(fastsoftmax::detail::takes_pairs(base, most, 2));
  EXPECT_FALSE(fastsoftmax::detail::takes_pairs(base, most + 1, 2));
  // Off the boundary, rows of two keep the tiles from their start (2.5 tiles an SM).
  EXPECT_TRUE(fastsoftmax::detail::takes_tiles(false, 30000000, 2, 132));
}

// Without clusters (turned off here; absent before sm_90) every shape takes step07's paths.
TEST_F(LibraryDispatch, WithoutClustersServesEveryShape) {
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  ::testing::Test::RecordProperty("clusters", fastsoftmax::detail::cluster_report());
  // A split planned first, as a process that ran long rows before would have: path (d) below
  // once failed to launch after one (its shared-memory attribute set on another file's copy of
  // the kernel).
  (void)fastsoftmax::detail::plan_split(2, 1048579);
  fastsoftmax::set_clusters_enabled(false);
  struct Restore {  // clusters back on for the tests after this one, also when a check throws
    ~Restore() { fastsoftmax::set_clusters_enabled(true); }
  } restore;
  EXPECT_EQ(fastsoftmax::detail::plan_split(2, 1048579).path, Split::kNone);
  for (const int cols : {1048579, 131075, 65536, 20000}) {
    const VerifyResult r = check_step(*step, 3, cols, InputKind::kMaxAtEnds, next_seed(), {1, 1});
    EXPECT_TRUE(r.ok()) << "3x" << cols << " without clusters: " << r.report();
  }
  // Path (d) over more rows than blocks: rows that start at a different place in the cache than
  // the block's last row (N % 4 != 0, or x off a 16-byte boundary) and rows that start at the same.
  for (const int cols : {32771, 20000})
    for (const int off : {0, 1})
      for (InputKind kind : {InputKind::kNormal, InputKind::kMaxAtEnds}) {
        const VerifyResult r = check_step(*step, 300, cols, kind, next_seed(), {off, off});
        EXPECT_TRUE(r.ok()) << "300x" << cols << " +" << off << " " << to_string(kind)
                            << " without clusters: " << r.report();
      }
}

// On sm_90 and later the split paths must be in use: a silent fallback would pass every other
// test while measuring step07.
TEST_F(LibraryDispatch, ClustersUsedWhereTheyExist) {
  const DeviceInfo dev = query_device();
  std::printf("%s\n", fastsoftmax::detail::cluster_report().c_str());
  if (dev.cc_major < 9) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  EXPECT_TRUE(fastsoftmax::detail::clusters_usable());
  EXPECT_EQ(fastsoftmax::detail::plan_split(2048, 65536).path, Split::kCluster);
  EXPECT_EQ(fastsoftmax::detail::plan_split(8, 1048576).path, Split::kHeld);
  EXPECT_EQ(fastsoftmax::detail::plan_split(8, 1048576).parts, 32);
  // (i) over every resident CTA where that is a tenth more than the fewest that hold a row
  // (6x1048576: 44 on an H100 against 32); 8x1048576's 33 is not.
  EXPECT_EQ(fastsoftmax::detail::plan_split(6, 1048576).path, Split::kHeld);
  EXPECT_EQ(fastsoftmax::detail::plan_split(6, 1048576).parts, 2 * dev.sm_count / 6);
  // Rows longer than (h) holds on the whole GPU: (i) in CTAs of 1024 threads, one an SM.
  EXPECT_EQ(fastsoftmax::detail::plan_split(1, 4400003).parts, 68);
  EXPECT_EQ(fastsoftmax::detail::plan_split(1, 4400003).threads, 1024);
  EXPECT_EQ(fastsoftmax::detail::plan_split(8, 1048576).threads, 512);
  EXPECT_EQ(fastsoftmax::detail::plan_split(2, 1048576).path, Split::kGrid);
  EXPECT_EQ(fastsoftmax::detail::plan_split(1, 4400003).path, Split::kHeld);
  // Pairs as tagged words: (i) always, (h) where a group takes at most four rows (groups of 64
  // CTAs of 512, two an SM: 2 * SMs / 64 groups fit) or at most three groups fit (change 42).
  EXPECT_TRUE(fastsoftmax::detail::plan_split(8, 1048576).tagged);
  EXPECT_TRUE(fastsoftmax::detail::plan_split(1, 4400003).tagged);
  EXPECT_TRUE(fastsoftmax::detail::plan_split(2, 1048576).tagged);
  const int fit64 = 2 * dev.sm_count / 64;
  EXPECT_TRUE(fastsoftmax::detail::make_split(Split::kGrid, 64, 4 * fit64, 64 * 4096).tagged);
  if (fit64 > 3)  // at most three groups: tagged over any rows (change 42)
    EXPECT_FALSE(fastsoftmax::detail::make_split(Split::kGrid, 64, 4 * fit64 + 1, 64 * 4096).tagged);
  EXPECT_EQ(fastsoftmax::detail::plan_split(1, 9000001).path, Split::kNone);
  EXPECT_EQ(fastsoftmax::detail::plan_split(4096, 1024).path, Split::kNone);
  // Rows of 9-16 CTAs' worth: clusters of 16 on enough rows for one round of clusters, grid groups
  // on fewer (on 384 rows or more, (g) with held parts: change 52); few rows of at most 8 CTAs'
  // worth: clusters spread over the resident CTAs; rows that step07's path (d) holds: clusters
  // of 2.
  EXPECT_EQ(fastsoftmax::detail::plan_split(256, 262144).path, Split::kCluster);
  EXPECT_EQ(fastsoftmax::detail::plan_split(256, 262144).parts, 16);
  // Many rows: a cluster per two rows (the hardware starts each where one ends); few: no more
  // clusters than fit at once.
  EXPECT_EQ(fastsoftmax::detail::plan_split(256, 262144).groups, 128);
  EXPECT_EQ(fastsoftmax::detail::plan_split(2048, 65539).groups, 1024);
  EXPECT_LE(fastsoftmax::detail::plan_split(64, 262144).groups, 16);
  EXPECT_EQ(fastsoftmax::detail::plan_split(64, 262144).path, Split::kCluster);
  EXPECT_EQ(fastsoftmax::detail::plan_split(8, 262144).path, Split::kHeld);  // change 50
  EXPECT_EQ(fastsoftmax::detail::plan_split(4096, 32771).path, Split::kCluster);
  EXPECT_EQ(fastsoftmax::detail::plan_split(4096, 32771).parts, 2);
  EXPECT_EQ(fastsoftmax::detail::plan_split(16, 65536).path, Split::kCluster);
  // Few rows of 8193-16384 slots: clusters of 9-16 CTAs of 128 threads where every row fits in
  // one round (change 28), the widest that does.
  if (16 * 16 <= 8 * dev.sm_count) {
    EXPECT_EQ(fastsoftmax::detail::plan_split(16, 65536).parts, 16);
    EXPECT_EQ(fastsoftmax::detail::plan_split(16, 65536).threads, 128);
  }
  if (dev.sm_count >= 132) {  // 95 clusters of 9 fit on an H100 or H200
    EXPECT_EQ(fastsoftmax::detail::plan_split(95, 36005).threads, 128);
    EXPECT_EQ(fastsoftmax::detail::plan_split(95, 36005).parts, 9);
  }
  // Small matrices of few rows of 2048-8192 slots: clusters of 2-8 CTAs of 128 threads, one row
  // each, all in one round and at most 8 CTAs an SM; not at 2047 slots and fewer, and not where
  // even the narrowest clusters (8 float4 a thread) would be more than 8 CTAs an SM. The rows
  // start in stages of whole MiB of the matrix (rounded down), none under 2 MiB.
  if (32 * 8 <= 8 * dev.sm_count) {
    const SplitPlan small = fastsoftmax::detail::plan_split(32, 16384);  // 2 MiB: 2 stages of 16 rows
    EXPECT_EQ(small.path, Split::kCluster);
    EXPECT_EQ(small.threads, 128);
    EXPECT_EQ(small.parts, 8);
    EXPECT_EQ(small.groups, 32);
    EXPECT_GT(small.stagger_ns, 0u);
    EXPECT_EQ(small.stage_groups, 16);
  }
  if (64 * 8 <= 8 * dev.sm_count) {
    const SplitPlan eight = fastsoftmax::detail::plan_split(64, 32768);  // 8 MiB: 8 stages of 8 rows
    EXPECT_EQ(eight.path, Split::kCluster);
    EXPECT_EQ(eight.threads, 128);
    EXPECT_EQ(eight.stage_groups, 8);
    // The same bytes a stage, the same time apart, whatever the row length.
    EXPECT_EQ(eight.stagger_ns, fastsoftmax::detail::plan_split(32, 16384).stagger_ns);
  }
  if (24 * 8 <= 8 * dev.sm_count) {
    EXPECT_EQ(fastsoftmax::detail::plan_split(16, 16384).stagger_ns, 0u);  // 1 MiB: one stage
    EXPECT_EQ(fastsoftmax::detail::plan_split(24, 16384).stagger_ns, 0u);  // 1.5 MiB: one stage
  }
  if (8 * 6 <= 8 * dev.sm_count) {
    const SplitPlan six = fastsoftmax::detail::plan_split(8, 10244);  // 2561 slots
    EXPECT_EQ(six.path, Split::kCluster);
    EXPECT_EQ(six.threads, 128);
    EXPECT_EQ(six.parts, 6);
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 10243).parts, 5);  // 2560 slots
    EXPECT_EQ(fastsoftmax::detail::plan_split(32, 8192).parts, 4);
    EXPECT_EQ(fastsoftmax::detail::plan_split(8, 8192).parts, 4);  // 2048 slots
  }
  EXPECT_EQ(fastsoftmax::detail::plan_split(8, 8191).path, Split::kNone);  // 2047 slots
  EXPECT_EQ(fastsoftmax::detail::plan_split(2 * dev.sm_count + 1, 16384).path, Split::kNone);
  // Every row in one round wherever a grid group of the fewest CTAs that hold a row takes them
  // in one (on an H100, all of these): few rows that the widest clusters would take in two
  // rounds (40x60001: clusters of 5, not 6), and rows just past one round of clusters of the
  // fewest CTAs (63x50001: 62 clusters of 4 fit; grid groups of 4).
  struct Shape {
    int rows, cols;
  };
  for (const Shape s : {Shape{31, 70001}, Shape{40, 60001}, Shape{44, 50001}, Shape{50, 50001},
                        Shape{63, 50001}, Shape{85, 40001}, Shape{42, 90001}, Shape{32, 120001},
                        Shape{15, 262144}, Shape{16, 262147}}) {
    const int need = std::max(2, (s.cols / 4 + 4095) / 4096);  // 512 threads, 8 float4 each
    const SplitPlan grid = fastsoftmax::detail::make_split(Split::kGrid, need, s.rows, s.cols);
    const SplitPlan plan = recorded_plan(s.rows, s.cols);
    if (grid.groups < s.rows) continue;  // no one-round plan on this GPU
    EXPECT_EQ(plan.groups, s.rows) << s.rows << "x" << s.cols << ": "
                                   << fastsoftmax::detail::describe(plan);
  }
  // Rows of 2 CTAs' worth past one round of clusters of 2 (132 on an H100) and of grid groups,
  // up to two rounds: one round of clusters where they fit, else step07's path (d).
  for (const Shape s : {Shape{140, 20001}, Shape{220, 16500}, Shape{264, 20001}}) {
    const SplitPlan plan = recorded_plan(s.rows, s.cols);
    EXPECT_TRUE(plan.path == Split::kNone || plan.groups == s.rows)
        << s.rows << "x" << s.cols << ": " << fastsoftmax::detail::describe(plan);
  }
  // Rows of 3 CTAs' worth past one round of clusters of 3 and of grid groups of 3, at most one a
  // SM, on matrices of up to 18 MiB: step07's path (d) (change 29). Where the small clusters of
  // 9-16 take every row in one round (95x36005 on an H100) or grid groups of 3 do (88x48000),
  // those keep them; past 18 MiB (120x45001, 128x49152, 132x36005) and past one row an SM
  // (133x36005; 133x32772, 17.4 MB, is past the rows bound alone), clusters of 3.
  if (dev.sm_count == 132) {
    for (const Shape s : {Shape{89, 48000}, Shape{110, 38000}, Shape{117, 36005},
                          Shape{130, 32800}, Shape{105, 44444}}) {
      const SplitPlan plan = fastsoftmax::detail::plan_split(s.rows, s.cols);
      EXPECT_EQ(plan.path, Split::kNone) << s.rows << "x" << s.cols << ": "
                                         << fastsoftmax::detail::describe(plan);
    }
    for (const Shape s : {Shape{120, 45001}, Shape{128, 49152}, Shape{132, 36005},
                          Shape{133, 36005}, Shape{133, 32772}}) {
      const SplitPlan plan = fastsoftmax::detail::plan_split(s.rows, s.cols);
      EXPECT_EQ(plan.path, Split::kCluster) << s.rows << "x" << s.cols;
      EXPECT_EQ(plan.parts, 3) << s.rows << "x" << s.cols;
    }
    EXPECT_EQ(fastsoftmax::detail::plan_split(88, 48000).path, Split::kGrid);
    EXPECT_EQ(fastsoftmax::detail::plan_split(88, 48000).groups, 88);
    // Rows of 4 CTAs' worth past one round of clusters of 4 and of grid groups of 4, where 3 CTAs
    // of path (i) a row take every row in one round (67-88 rows): (i) in 3 (change 30); 66 rows,
    // grid groups of 4 in one round; 89, clusters of 4.
    for (const Shape s : {Shape{67, 65536}, Shape{75, 57000}, Shape{88, 52000}}) {
      const SplitPlan plan = fastsoftmax::detail::plan_split(s.rows, s.cols);
      EXPECT_EQ(plan.path, Split::kHeld) << s.rows << "x" << s.cols;
      EXPECT_EQ(plan.parts, 3) << s.rows << "x" << s.cols;
      EXPECT_EQ(plan.groups, s.rows) << s.rows << "x" << s.cols;
    }
    EXPECT_EQ(fastsoftmax::detail::plan_split(66, 65536).path, Split::kGrid);
    EXPECT_EQ(fastsoftmax::detail::plan_split(89, 52000).path, Split::kCluster);
  }
}

// Path (h) where at most three groups fit: tagged pairs over any number of rows; where more fit,
// at most four rows a group (change 42). The rule against make_split's own plans on the GPU it
// runs on; the plans on an H100 or H200 (264 CTAs of 512 resident: rows of 67 CTAs' worth and more
// fit in at most three groups); shapes that take tagged pairs over many rows against the
// reference.
TEST_F(LibraryDispatch, TaggedPairsOverAnyRowsInFewGroups) {
  const DeviceInfo dev = query_device();
  if (dev.cc_major < 9) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  for (const int k : {17, 44, 66, 67, 88, 132}) {
    const int cols = k * 16384;  // k CTAs of 512 threads, 8 float4 each
    // The groups that fit: over a million rows, make_split balances them over all of them.
    const int64_t fits = fastsoftmax::detail::make_split(Split::kGrid, k, 1000000, cols).groups;
    for (const int64_t rounds : {int64_t(4), int64_t(5), int64_t(40)}) {
      const int rows = static_cast<int>(fits * rounds);
      const SplitPlan plan = fastsoftmax::detail::make_split(Split::kGrid, k, rows, cols);
      EXPECT_EQ(plan.tagged, rounds <= 4 || fits <= 3)
          << rows << "x" << cols << " in groups of " << k << ": " << fits << " fit";
    }
  }
  if (dev.sm_count == 132) {
    const SplitPlan wide = fastsoftmax::detail::plan_split(66, 1912074);  // 2 groups of 117, 33 rounds
    EXPECT_EQ(wide.path, Split::kGrid);
    EXPECT_EQ(wide.parts, 117);
    EXPECT_TRUE(wide.tagged);
    EXPECT_TRUE(fastsoftmax::detail::plan_split(100, 1200000).tagged);    // 3 groups of 74
    // 4 groups of 64 and 8 of 32 (the plan gives both (g) with held parts since change 44).
    EXPECT_FALSE(fastsoftmax::detail::make_split(Split::kGrid, 64, 128, 1048576).tagged);
    EXPECT_FALSE(fastsoftmax::detail::make_split(Split::kGrid, 32, 80, 520000).tagged);
  }
  const Step* step = &library();
  ASSERT_NE(step, nullptr);
  // On an H100: 2 groups of 117 over 5 rows each; 3 groups of 68 over 10 rows each.
  for (const RowsCols s : {RowsCols{10, 1912074}, RowsCols{30, 1100001}}) {
    ::testing::Test::RecordProperty(
        std::to_string(s.rows) + "x" + std::to_string(s.cols),
        fastsoftmax::detail::describe(fastsoftmax::detail::plan_split(s.rows, s.cols)));
    for (InputKind kind : {InputKind::kMaxAtEnds, InputKind::kOneFiniteAtEnds})
      for (const int offset : {0, 3}) {
        const VerifyResult r =
            check_step(*step, s.rows, s.cols, kind, next_seed(), {offset, offset});
        EXPECT_TRUE(r.ok()) << s.rows << "x" << s.cols << " x+" << offset << " "
                            << to_string(kind) << ": " << r.report();
      }
  }
}

// The tagged words of (h) and (i) are one set for every kernel that uses them, whatever its float4
// count, CTA size or path: each launch must find the set the one before it cleared. Kernels of
// different sizes one after another, the first again at the end (with a count of launches per
// kernel instead of one for all, a launch found the words another kernel had left and merged
// them: docs/notes/tuning.md, step08 change 20, run 4).
TEST_F(LibraryDispatch, TaggedWordsAcrossKernels) {
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  const Case sequence[] = {{Split::kHeld, 4, 12, 8 * 2048 - 1, 0, 0},
                           {Split::kHeld, 4, 12, 8 * 2048 * 8 - 1, 1, 1},
                           {Split::kGrid, 4, 12, 4 * 2048 * 4 + 1, 2, 2},
                           {Split::kHeld, 4, 12, 16 * 2048 * 2 + 3, 3, 3, 1024},
                           {Split::kGrid, 8, 3, 7, 1, 1},
                           {Split::kHeld, 4, 12, 8 * 2048 - 1, 0, 0}};
  for (const Case& c : sequence) {
    g_path = c.path;
    g_parts = c.parts;
    g_threads = c.threads;
    ASSERT_TRUE(fastsoftmax::detail::make_split(c.path, c.parts, c.rows, c.cols, c.threads).tagged);
    for (InputKind kind : {InputKind::kNormal, InputKind::kMaxAtEnds}) {
      const VerifyResult r =
          check_step(kForced, c.rows, c.cols, kind, next_seed(), {c.x_offset, c.y_offset});
      EXPECT_TRUE(r.ok()) << case_name(c) << " " << to_string(kind) << ": " << r.report();
    }
  }
}

// Bad splits are refused with a reason, before anything runs.
TEST_F(LibraryDispatch, RefusesSplitsThatCannotRun) {
  if (!fastsoftmax::detail::clusters_usable()) GTEST_SKIP() << fastsoftmax::detail::cluster_report();
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kCluster, 17, 4, 100000), fastsoftmax::Error);
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kGrid, 1, 4, 100000), fastsoftmax::Error);
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kCluster, 2, 4, 2 * 16384 + 4),
               fastsoftmax::Error);  // 8 float4 a thread at most
  EXPECT_NO_THROW(fastsoftmax::detail::make_split(Split::kHeld, 2, 4, 2 * 16384 + 4));
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kHeld, 2, 4, 4 * 16384 + 4),
               fastsoftmax::Error);  // 16 float4 a thread at most
  EXPECT_NO_THROW(fastsoftmax::detail::make_split(Split::kHeld, 2, 4, 4 * 16384 + 4, 1024));
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kHeld, 2, 4, 8 * 16384 + 4, 1024),
               fastsoftmax::Error);  // 16 float4 a thread at most, 1024 threads
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kCluster, 4, 4, 100000, 1024),
               fastsoftmax::Error);  // 1024 threads only for (i)
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kGrid, 4, 4, 100000, 128),
               fastsoftmax::Error);  // 128 threads only for (g)
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kCluster, 2, 4, 2 * 4096 + 4, 128),
               fastsoftmax::Error);  // 8 float4 a thread at most, 128 threads
  EXPECT_NO_THROW(fastsoftmax::detail::make_split(Split::kCluster, 2, 4, 2 * 4096, 128));
  EXPECT_NO_THROW(fastsoftmax::detail::make_split(Split::kCluster, 16, 4, 16 * 1024, 128));
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kCluster, 17, 4, 17 * 1024, 128),
               fastsoftmax::Error);  // a cluster holds at most 16
  EXPECT_THROW(fastsoftmax::detail::make_split(Split::kGrid, 4, 4, 100000, 256),
               fastsoftmax::Error);
}

}  // namespace
}  // namespace softmax
