// SPDX-License-Identifier: MIT
// fastsoftmax: the sizes of the split kernels (split_*.cuh), for the host code that plans them.
#pragma once

#include "reduce.cuh"

namespace fastsoftmax::detail {

constexpr int kSplitThreads = 512;
constexpr int kSplitWarps = kSplitThreads / kWarpSize;
constexpr int kMaxClusterCtas = 16;  // 9-16 need cudaFuncAttributeNonPortableClusterSizeAllowed
constexpr int kMaxGridCtas = 4096;   // the most CTAs the grid paths' exchange area holds

// The tagged pairs (16-byte loads) a lane issues before it uses any: a group of up to
// kTaggedBatchParts CTAs reads its pairs in one batch, a larger one in two or more.
constexpr int kTaggedBatch = 4;
constexpr int kTaggedBatchParts = kTaggedBatch * kWarpSize;

// Clusters of CTAs of 128 threads (split_small.cuh): one pair a lane up to K = 8 (K * 4 <= 32),
// two a lane (kWide) for K = 9..16.
constexpr int kSmallSplitThreads = 128;
constexpr int kSmallSplitWarps = kSmallSplitThreads / kWarpSize;
constexpr int kSmallNarrowParts = kWarpSize / kSmallSplitWarps;
constexpr int kSmallMaxParts = 2 * kSmallNarrowParts;

}  // namespace fastsoftmax::detail
