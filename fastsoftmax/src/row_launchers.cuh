// SPDX-License-Identifier: MIT
// fastsoftmax: the launches of the paths that give a row at most one block (docs/library.md, "The
// path table"), each sized to the row. Included by dispatch.cu only.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>

#include "block_rows.cuh"
#include "launch.cuh"
#include "long_rows.cuh"
#include "plan_record.h"
#include "short_rules.h"
#include "single_rows.cuh"
#include "tile_rows.cuh"
#include "warp_rows.cuh"

namespace fastsoftmax::detail {

// Path (a)/(b) with a block per group of rows, one row per group, and no persistent grid.
template <int kGroup, int kPacks, bool kAligned>
void launch_one_row_per_group(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const auto one_row = warp_rows_kernel<kGroup, kPacks, false, kAligned>;
  const auto blocks = static_cast<unsigned>(group_blocks<kGroup>(rows));
  if (recording()) name_kernel("warp_rows: " + std::to_string(kGroup) + " lanes a row, " + std::to_string(kPacks) +
         " float4 a lane, one row a group");
  if (recorded(blocks, kWarpThreads)) return;
  one_row<<<blocks, kWarpThreads, 0, stream>>>(x, y, rows, cols);
  FS_CHECK_LAUNCH();
}

// (a) and (b). A matrix of many waves of blocks (many_waves) gets a block per group of rows, one
// row per group, and the hardware's block scheduler (as path c); so does a matrix of under 31 KB
// an SM (latency_bound), where a second round of rows per block only lengthens the chain
// (docs/notes/step08.md, change 17: on the H100 100x100 4.13 us against 4.58-4.61, 2048x256
// 5.12-5.17 against 5.47; level at 8192x100, behind at 4096x256).
// The rest a persistent grid where, for whole warps at every slot count but 4, the next row is
// in flight (see the header). At 4 slots a lane unaligned rows have it in flight too from 0.9
// waves of blocks: 2-5% faster than without from 0.97 to 1.29 waves (6144-8192 rows of 450 and
// 509 floats), mixed at 0.81 (5120 rows: 3% faster at 509, 1.5% slower at 450), 1-1.5% slower
// at 0.65 (4096 rows; change 23).
template <int kGroup, int kPacks, bool kAligned>
void launch_warp_rows(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr bool kWarp = kGroup == kWarpSize;
  constexpr bool kNextInFlight = kPacks != 4 && kWarp;
  if (many_waves<kGroup, kPacks, kAligned>(rows, cols) || latency_bound(rows, cols))
    return launch_one_row_per_group<kGroup, kPacks, kAligned>(x, y, rows, cols, stream);
  const int64_t work_blocks = group_blocks<kGroup>(rows);
  if (recording()) name_kernel("warp_rows: " + std::to_string(kGroup) + " lanes a row, " + std::to_string(kPacks) +
         " float4 a lane, persistent");
  if constexpr (kWarp && kPacks == 4 && !kAligned) {
    if (twentieths_of_waves<kGroup, kPacks, kAligned>(rows) >= 18) {
      return launch_persistent(warp_rows_kernel<kGroup, kPacks, true, kAligned>, kWarpThreads, 0,
                               work_blocks, x, y, rows, cols, stream, 2);
    }
  }
  launch_persistent(warp_rows_kernel<kGroup, kPacks, kNextInFlight, kAligned>, kWarpThreads, 0,
                    work_blocks, x, y, rows, cols, stream, kNextInFlight ? 2 : 1);
}

// (a): one slot a lane, in groups of the smallest power of two of lanes that holds the row. On
// matrices of 1.5 waves of such blocks or more, rows of 5-32 slots take 2 or 4 slots a lane in
// groups of 4 or 8 lanes instead: a half to a quarter of the blocks, 32-64 bytes a lane in
// flight, and 1-2 fewer shuffle rounds per reduction (docs/notes/step07.md, change 18: 65536x128
// 1.02 of memcpy against 0.99, 65536x64 0.99 against 0.98; at 8192x128, under one wave, one
// float4 a lane stayed ahead, 0.94-0.95 against 0.92-0.93).
template <bool kAligned>
void launch_sub_warp(int64_t slots, const float* x, float* y, int rows, int cols,
                     cudaStream_t stream) {
  if (slots <= 1) return launch_warp_rows<1, 1, kAligned>(x, y, rows, cols, stream);
  if (slots <= 2) return launch_warp_rows<2, 1, kAligned>(x, y, rows, cols, stream);
  if (slots <= 4) return launch_warp_rows<4, 1, kAligned>(x, y, rows, cols, stream);
  if (slots <= 8) {
    if (many_waves<8, 1, kAligned>(rows, cols))
      return launch_warp_rows<4, 2, kAligned>(x, y, rows, cols, stream);
    return launch_warp_rows<8, 1, kAligned>(x, y, rows, cols, stream);
  }
  if (slots <= 16) {
    if (many_waves<16, 1, kAligned>(rows, cols))
      return launch_warp_rows<8, 2, kAligned>(x, y, rows, cols, stream);
    return launch_warp_rows<16, 1, kAligned>(x, y, rows, cols, stream);
  }
  if (many_waves<32, 1, kAligned>(rows, cols))
    return launch_warp_rows<8, 4, kAligned>(x, y, rows, cols, stream);
  return launch_warp_rows<32, 1, kAligned>(x, y, rows, cols, stream);
}

// (a1): one float4 slot (four rows) a thread, a block per 256 slots, no persistent grid. Measured
// against 2, 4 and 8 slots a thread, which gave fewer blocks: level or behind at every size from 1
// to 67M rows, by up to 0.18 of memcpy on small matrices (docs/notes/step08.md, change 18).
// (a2), rows of two floats on an 8-byte boundary, the same way: two rows a slot (change 43;
// takes_pairs in tile_plan.h says which).
template <int kCols>
void launch_single(const float* x, float* y, int rows, cudaStream_t stream) {
  // The body has at most this many (rows * kCols - head) / 4 slots.
  const int64_t slots = int64_t(rows) * kCols / 4 + 1;
  const int64_t blocks = (slots + kSingleThreads - 1) / kSingleThreads;
  if (recording()) name_kernel("single_rows: " + std::to_string(4 / kCols) + " rows a float4");
  if (recorded(blocks, kSingleThreads)) return;
  single_rows_kernel<1, kCols>
      <<<static_cast<unsigned>(blocks), kSingleThreads, 0, stream>>>(x, y, rows);
  FS_CHECK_LAUNCH();
}

// (b4): a warp per row, ceil(N / 32) floats a lane in 4-byte accesses, one row a warp, no
// persistent grid (warp_rows.cuh says why).
void launch_strided(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = kWarpThreads / kWarpSize;
  const int64_t blocks = (int64_t(rows) + kWarpsPerBlock - 1) / kWarpsPerBlock;
  with_packs<2, kStridedMaxPer>((cols + kWarpSize - 1) / kWarpSize, [&](auto p) {
    if (recording()) name_kernel("strided_rows: a warp a row, " + std::to_string(decltype(p)::value) +
           " floats a lane, 4-byte accesses");
    if (recorded(blocks, kWarpThreads)) return;
    strided_rows_kernel<decltype(p)::value>
        <<<static_cast<unsigned>(blocks), kWarpThreads, 0, stream>>>(x, y, rows, cols);
    FS_CHECK_LAUNCH();
  });
}

// (a'): one tile of rows per block, kGroup lanes per row, kPerLane = ceil(N / kGroup) elements
// a lane (the kernel relies on it being exact).
template <int kGroup, int kPerLane>
void launch_tile(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const int per_tile = tile_rows(cols, kGroup);
  const int64_t tiles = (int64_t(rows) + per_tile - 1) / per_tile;
  if (recording()) name_kernel("tile_rows: " + std::to_string(per_tile) + " rows a tile, " + std::to_string(kGroup) +
         " lanes a row, " + std::to_string(kPerLane) + " floats a lane");
  if (recorded(tiles, kTileThreads)) return;
  tile_rows_kernel<kGroup, kPerLane><<<static_cast<unsigned>(tiles), kTileThreads, 0, stream>>>(
      x, y, rows, cols, per_tile);
  FS_CHECK_LAUNCH();
}

// (a') for rows of kGroup*(kLo-1)+1 .. kGroup*kHi floats: kPerLane = ceil(N / kGroup).
template <int kGroup, int kLo, int kHi>
void launch_tiles(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  with_packs<kLo, kHi>((cols + kGroup - 1) / kGroup, [&](auto p) {
    launch_tile<kGroup, decltype(p)::value>(x, y, rows, cols, stream);
  });
}

// (c): kPacks slots per thread, just enough to cover the row (padding slots would cost exps).
// Blocks of 128 threads with at most one row an SM take the chain of one barrier (block_rows.cuh;
// with more rows it measured 1-3% slower, change 25), except unaligned rows of 8-10 slots a
// thread (about 3.6K-5.1K floats; timed at 3841-5003): there the one-barrier block measured
// level with step07's two reductions or up to 3.3% behind at 2-132 rows, in all but one of 72
// process-cells (change 39).
// Rows of blocks of 256 (8K-16K floats) that few take the small clusters on sm_90 (split.cu), so
// they keep one chain.
template <int kPacks, bool kAligned>
constexpr bool one_barrier_packs() {
  return kAligned || kPacks < 8 || kPacks > 10;
}

template <int kThreads, bool kAligned>
void launch_register_block(int64_t slots, const float* x, float* y, int rows, int cols,
                           cudaStream_t stream) {
  const int64_t packs = (slots + kThreads - 1) / kThreads;
  const bool one_barrier = rows <= device_info().sms;
  with_packs<3, 16>(packs, [&](auto p) {
    constexpr int kPacks = decltype(p)::value;
    if constexpr (kThreads == 128 && one_barrier_packs<kPacks, kAligned>()) {
      if (one_barrier) {
        if (recording()) name_kernel("register_block: " + std::to_string(kPacks) + " float4 a thread, one barrier");
        if (recorded(rows, kThreads)) return;
        register_block_kernel<kThreads, kPacks, kAligned, true>
            <<<rows, kThreads, 0, stream>>>(x, y, rows, cols);
        FS_CHECK_LAUNCH();
        return;
      }
    }
    if (recording()) name_kernel("register_block: " + std::to_string(kPacks) + " float4 a thread");
    if (recorded(rows, kThreads)) return;
    register_block_kernel<kThreads, kPacks, kAligned><<<rows, kThreads, 0, stream>>>(x, y, rows,
                                                                                     cols);
    FS_CHECK_LAUNCH();
  });
}

// (d) may use the shared memory device_info() counted, past the 48 KB default: set once per device
// on `kernel` as this file launches it. The attribute belongs to the kernel that file's own
// launches reach: when launch.cuh's device_info() set it, from whichever file first asked for the
// device's facts, a process that had planned a split (split.cu) before its first path (d) launch
// failed that launch with an invalid argument (tests/test_step08.cpp,
// WithoutClustersServesEveryShape, now plans one first).
void allow_cache_bytes(KernelFn kernel) {
  static std::mutex mutex;
  static std::set<int> done;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  const int bytes = device_info().cache_bytes;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(device).second) return;
  FS_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// (e) and (f): a block per row.
template <int kVec>
void launch_two_pass(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (recording()) name_kernel(kVec == 4 ? "two_pass: float4 accesses" : "two_pass: 4-byte accesses");
  launch_persistent(two_pass_kernel<kLongRowThreads, kVec>, kLongRowThreads, 0, rows, x, y, rows,
                    cols, stream);
}

// (a)-(c): the row in registers. kAligned compiles the head and the tail out.
template <bool kAligned>
void launch_in_registers(int64_t slots, const float* x, float* y, int rows, int cols,
                         cudaStream_t stream) {
  // (b) holds 9 slots a lane on aligned rows, 8 on others. Unaligned rows of 257-288 slots take
  // (c) in blocks of 64 threads, 5 slots each: 0-0.03 of memcpy ahead of (b) on the H100,
  // within 0.015 of it either way on the H200; blocks of 128 (3 slots each) were as fast on the
  // H100 but 0.01-0.04 behind on the H200 (docs/notes/step08.md, change 14).
  constexpr int kMaxPacks = kAligned ? kWarpMaxPacks : kWarpMaxPacks - 1;
  if (slots <= kWarpSize) {  // (a)
    note("sub_warp", "rows of at most 32 float4: a group of 1-32 lanes a row, the row in registers");
    return launch_sub_warp<kAligned>(slots, x, y, rows, cols, stream);
  }
  if (slots <= kWarpSize * kMaxPacks) {  // (b)
    note("warp", "rows of 33-288 float4: a warp a row, 2-9 float4 a lane in registers");
    return with_packs<2, kMaxPacks>((slots + kWarpSize - 1) / kWarpSize, [&](auto p) {
      launch_warp_rows<kWarpSize, decltype(p)::value, kAligned>(x, y, rows, cols, stream);
    });
  }
  note("block", "rows of up to 4096 float4 (16K floats): a block a row, in registers");
  if constexpr (!kAligned) {
    if (slots <= kWarpSize * kWarpMaxPacks) {  // (c), 64 threads
      if (recording()) name_kernel("register_block: 5 float4 a thread");
      if (recorded(rows, 64)) return;
      register_block_kernel<64, 5, false><<<rows, 64, 0, stream>>>(x, y, rows, cols);
      FS_CHECK_LAUNCH();
      return;
    }
  }
  if (slots <= 128 * 16)
    return launch_register_block<128, kAligned>(slots, x, y, rows, cols, stream);
  launch_register_block<256, kAligned>(slots, x, y, rows, cols, stream);  // (c)
}

}  // namespace fastsoftmax::detail
