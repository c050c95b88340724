// SPDX-License-Identifier: MIT
// fastsoftmax: what the split plan (split_make.cu, split_plan.cu) and its launch (split_launch.cu)
// share: the rules' constants (docs/library.md, "Long rows: clusters" and "Few rows and very long
// rows: the grid") and the sizes of the kernels' parts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "split.h"
#include "split_sizes.h"

namespace fastsoftmax::detail {

constexpr int kSlotsPerCta = kSplitThreads * 8;  // the most a part holds: 8 float4 a thread
// Rows of 3 CTAs' worth that clusters of 3 would take in two rounds go to `smem_block`, one row
// a block, up to this size of the matrix (plan_rows).
constexpr int64_t kRowsInOneWaveBytes = int64_t(18) << 20;
// Rows per resident cluster from which `cluster` launches a cluster per two rows (make_split).
constexpr int64_t kRowsPerClusterForWaves = 8;
// The most rows a group of `grid` takes with TaggedExchange (make_split).
constexpr int64_t kTaggedRounds = 4;
// `grid` where at most this many groups fit at once: tagged pairs over any number of rows
// (make_split).
constexpr int64_t kTaggedGroups = 3;
// Rows of 2-4 MiB take `cluster_held` in CTAs of 1024 from this many rows, where at most
// kHeldWideGroups groups of `grid` fit (plan_rows).
constexpr int64_t kHeldWideRows = 96;
constexpr int64_t kHeldWideGroups = 6;
// Up to this many rows of at most 8 CTAs' worth take clusters wider than 8 (plan_rows).
constexpr int64_t kWideClusterRows = 7;
// Rows of up to this many slots past 4096 keep `smem_block` over up to two waves of its blocks
// instead of clusters of 2 (plan_rows).
constexpr int64_t kShortPairSlots = 4750;
// Rows of 10-16 CTAs' worth of `cluster` in CTAs of 512 take `cluster_held`, in half as many
// CTAs, from this many rows (plan_rows; measured on the H200).
constexpr int64_t kHeldClusterMinParts = 10;
constexpr int64_t kHeldClusterRows = 384;
// The most rows plan_split spreads over every resident CTA with `grid_held`: the most measured.
constexpr int64_t kEveryCtaRows = 32;
// The most CTAs an SM the small clusters (CTAs of 128 threads) take a matrix at (plan_rows).
constexpr int64_t kSmallCtasPerSm = 8;
// The small clusters' stages (make_split): about this many bytes of the matrix each, the next
// starting this share of their time at peak DRAM bandwidth after: the loads are issued about 1.7
// times as fast as DRAM can serve them at its peak, so it never waits for work.
constexpr double kStageBytes = 1 << 20;
constexpr double kStageShare = 0.6;

// Calls f(std::integral_constant<int, P>) for the smallest P of 1, 2, 4, 8 with packs <= P.
template <typename F>
void with_split_packs(int packs, F&& f) {
  if (packs <= 1) return f(std::integral_constant<int, 1>{});
  if (packs <= 2) return f(std::integral_constant<int, 2>{});
  if (packs <= 4) return f(std::integral_constant<int, 4>{});
  f(std::integral_constant<int, 8>{});
}

// The stage: a part's slots, and 8 more for line_shift's offset (row_split.cuh).
inline size_t stage_bytes(int packs, int threads) {
  return (size_t(packs) * threads + 8) * sizeof(float4);
}

// How many clusters or groups of plan.parts CTAs fit on the GPU at once (cached per device).
int64_t groups_that_fit(const SplitPlan& plan);

// The plan by rows and row length alone (split_plan.cu); plan_split adds the few-rows rule.
SplitPlan plan_rows(int rows, int cols);

}  // namespace fastsoftmax::detail
