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

// `sub_warp`, `half_warp` or `warp` as plain blocks: one row a group, no persistent grid, the
// hardware's scheduler dealing the blocks out.
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

// `sub_warp` and `warp` (docs/library.md, "The persistent grid and waves"). One row a group, no
// persistent grid, on many waves of blocks (many_waves: the hardware's scheduler balances them
// better than a fixed order) and under 31 KB of input an SM (latency_bound: a second round of
// rows only lengthens the chain; H100, 100x100 4.13 us against 4.58-4.61). Otherwise a
// persistent grid; a warp a row keeps its next row in flight there (warp_rows.cuh) at every pack
// count but 4. At 4 float4 a lane, unaligned rows keep it too from 0.9 waves: 2-5% faster at
// 0.97-1.29 waves (6144-8192 rows of 450-509 floats), mixed at 0.81, 1-1.5% slower at 0.65.
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

// `sub_warp`: one float4 a lane, in groups of the fewest lanes (a power of two) that hold the
// row. From 1.5 waves of such blocks, rows of 5-32 slots take 2 or 4 float4 a lane in groups of
// 4 or 8 lanes instead: a half to a quarter of the blocks, 32-64 bytes a lane in flight and 1-2
// fewer shuffle rounds (65536x128 1.02 of memcpy against 0.99). Under one wave one float4 a lane
// stays ahead (8192x128 0.94-0.95 against 0.92-0.93). (docs/library.md, "Short rows")
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

// `single` (kCols = 1, four rows a float4) and `pairs` (kCols = 2, two rows a float4; takes_pairs
// in tile_plan.h says when): one float4 a thread, a block per 256, no persistent grid. Fewer,
// fuller threads (2, 4 or 8 float4 each) were level or behind at every size from 1 to 67M rows,
// by up to 0.18 of memcpy on small matrices. (docs/library.md, "Short rows")
template <int kCols>
void launch_single(const float* x, float* y, int rows, cudaStream_t stream) {
  // At least the body's (rows * kCols - head) / 4 slots.
  const int64_t slots = int64_t(rows) * kCols / 4 + 1;
  const int64_t blocks = (slots + kSingleThreads - 1) / kSingleThreads;
  if (recording()) name_kernel("single_rows: " + std::to_string(4 / kCols) + " rows a float4");
  if (recorded(blocks, kSingleThreads)) return;
  single_rows_kernel<1, kCols>
      <<<static_cast<unsigned>(blocks), kSingleThreads, 0, stream>>>(x, y, rows);
  FS_CHECK_LAUNCH();
}

// `strided`: a warp a row, ceil(N / 32) floats a lane in 4-byte accesses, one row a warp, no
// persistent grid (warp_rows.cuh says why).
inline void launch_strided(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
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

// `tiles`: one tile of rows a block, kGroup lanes a row, kPerLane = ceil(N / kGroup) floats a
// lane (the kernel relies on it being exact).
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

// `tiles` for rows of kGroup*(kLo-1)+1 .. kGroup*kHi floats: kPerLane = ceil(N / kGroup).
template <int kGroup, int kLo, int kHi>
void launch_tiles(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  with_packs<kLo, kHi>((cols + kGroup - 1) / kGroup, [&](auto p) {
    launch_tile<kGroup, decltype(p)::value>(x, y, rows, cols, stream);
  });
}

// `block`: kPacks float4 a thread, just enough to cover the row (padding slots still cost
// exponentials). With at most one row an SM, blocks of 128 take the one-barrier chain
// (block_rows.cuh; on more rows it was 1-3% slower), but not on unaligned rows of 8-10 float4 a
// thread (about 3.6K-5.1K floats), where it was level with the two reductions or up to 3.3%
// behind at 2-132 rows. Blocks of 256 (rows of 8K-16K floats) have no one-barrier form: on sm_90
// at most a row an SM of that length takes the small clusters instead (the split plan, split.h).
// (docs/library.md, "Rows of a warp or a block")
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

// `smem_block` may use the shared memory device_info() counted, past the 48 KB default: set once
// a device, here, on `kernel` as this file launches it. The attribute belongs to the kernel as
// the file that sets it reaches it: set in launch.cuh's device_info(), from whichever file first
// asked for the device's facts, it missed this file's kernel in a process that had planned a
// split first, and the first `smem_block` launch failed with an invalid argument
// (tests/test_library_paths.cpp, WithoutClustersServesEveryShape, plans a split first).
inline void allow_cache_bytes(KernelFn kernel) {
  static std::mutex mutex;
  static std::set<int> done;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  const int bytes = device_info().cache_bytes;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(device).second) return;
  FS_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// `two_pass` (kVec = 4) and `two_pass_scalar` (kVec = 1): a block a row, persistent.
template <int kVec>
void launch_two_pass(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (recording()) name_kernel(kVec == 4 ? "two_pass: float4 accesses" : "two_pass: 4-byte accesses");
  launch_persistent(two_pass_kernel<kLongRowThreads, kVec>, kLongRowThreads, 0, rows, x, y, rows,
                    cols, stream);
}

// `sub_warp`, `warp` and `block`: the row in registers. kAligned compiles the head and tail out.
template <bool kAligned>
void launch_in_registers(int64_t slots, const float* x, float* y, int rows, int cols,
                         cudaStream_t stream) {
  // `warp` holds up to 9 float4 a lane on aligned rows, 8 on others. Unaligned rows of 257-288
  // slots take `block` in 64 threads of 5 float4: 0-0.03 of memcpy ahead of `warp` on the H100,
  // within 0.015 either way on the H200, where blocks of 128 (3 float4 each) were 0.01-0.04
  // behind. (docs/library.md, "Rows of a warp or a block")
  constexpr int kMaxPacks = kAligned ? kWarpMaxPacks : kWarpMaxPacks - 1;
  if (slots <= kWarpSize) {  // sub_warp
    note("sub_warp", "rows of at most 32 float4: a group of 1-32 lanes a row, the row in registers");
    return launch_sub_warp<kAligned>(slots, x, y, rows, cols, stream);
  }
  if (slots <= kWarpSize * kMaxPacks) {  // warp
    note("warp", "rows of 33-288 float4: a warp a row, 2-9 float4 a lane in registers");
    return with_packs<2, kMaxPacks>((slots + kWarpSize - 1) / kWarpSize, [&](auto p) {
      launch_warp_rows<kWarpSize, decltype(p)::value, kAligned>(x, y, rows, cols, stream);
    });
  }
  note("block", "rows of up to 4096 float4 (16K floats): a block a row, in registers");
  if constexpr (!kAligned) {
    if (slots <= kWarpSize * kWarpMaxPacks) {  // block, 64 threads
      if (recording()) name_kernel("register_block: 5 float4 a thread");
      if (recorded(rows, 64)) return;
      register_block_kernel<64, 5, false><<<rows, 64, 0, stream>>>(x, y, rows, cols);
      FS_CHECK_LAUNCH();
      return;
    }
  }
  if (slots <= 128 * 16)
    return launch_register_block<128, kAligned>(slots, x, y, rows, cols, stream);
  launch_register_block<256, kAligned>(slots, x, y, rows, cols, stream);  // block
}

}  // namespace fastsoftmax::detail
