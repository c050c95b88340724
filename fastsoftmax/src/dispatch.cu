// SPDX-License-Identifier: MIT
// fastsoftmax: the dispatch. One launch picks one path by the row length, the number of rows, the
// pointers' alignment and the GPU; docs/library.md's path table lists the paths and says why each
// takes the shapes it takes. Each decision below notes its path for describe() (plan_record.h).
//
// Fast math: exp2 and 1/x from the special-function unit, without __expf's subnormal fix-up
// (reduce.cuh; docs/library.md, "The exponential and the merge"). No other.
// Traffic: every path reads each element once and writes it once (8 bytes a float), but for the
// two_pass fallbacks, which read it twice (12 bytes).
#include <cstdint>

#include "dispatch.h"
#include "row_launchers.cuh"
#include "split.h"
#include "tile_plan.h"

namespace fastsoftmax::detail {

void dispatch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const auto ux = reinterpret_cast<uintptr_t>(x), uy = reinterpret_cast<uintptr_t>(y);
  if ((ux - uy) % 16 != 0) {
    note("two_pass_scalar", "x and y do not share their offset from a 16-byte boundary, so no "
                            "float4 can be both loaded and stored: 4-byte accesses, row read twice");
    return launch_two_pass<1>(x, y, rows, cols, stream);
  }
  if (cols == 1) {
    note("single", "rows of one float: the matrix as one vector, four rows a float4");
    return launch_single<1>(x, y, rows, stream);
  }
  if (takes_pairs(ux, rows, cols)) {
    note("pairs", "rows of two floats on an 8-byte boundary: two rows a float4");
    return launch_single<2>(x, y, rows, stream);
  }
  // Long rows, and few rows, over several SMs (split_plan.cu decides). A split this GPU cannot
  // run (no cluster of the size the plan wants fits at once, as on a GPU shared or partitioned
  // so that fewer SMs are free) is refused by make_split; the rows then take the paths below,
  // which hold any row.
  SplitPlan plan;
  try {
    plan = plan_split(rows, cols);
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::kInvalidArgument) throw;
    plan = SplitPlan{};
  }
  if (plan.path != Split::kNone) return launch_split(plan, x, y, rows, cols, stream);
  // Short rows (docs/library.md, "Short rows"). The 16-lane band comes first: around one wave
  // of its blocks it is ahead of both the strided warps and the tiles.
  if (half_warp_rows(rows, cols)) {
    note("half_warp", "unaligned rows of 69-131 floats around one wave of 16-lane groups: one "
                      "row a group, two float4 a lane");
    return launch_one_row_per_group<16, 2, false>(x, y, rows, cols, stream);
  }
  // A warp a row in 4-byte accesses on matrices small enough to load at once; not 1-7 rows of
  // more than 768 floats (one lane's 25-32 accesses in a chain), nor many rows of 33-64 floats.
  const bool many_short_rows = cols <= 2 * kWarpSize && rows > 32 * device_info().sms;
  if (cols > kWarpSize && cols <= kWarpSize * kStridedMaxPer &&
      (strided_reach(rows, cols) || strided_below_band(rows, cols)) &&
      (rows >= 8 || cols <= 768) && !many_short_rows) {
    note("strided", "rows of 33-1024 floats on a matrix the GPU loads at once: a warp a row, "
                    "4-byte accesses, no head or tail");
    return launch_strided(x, y, rows, cols, stream);
  }
  // The most body slots a row can have, whatever its alignment: floor(N/4).
  const int64_t slots = cols / 4;
  const bool aligned = ux % 16 == 0 && cols % 4 == 0;
  if (aligned && half_warp_aligned_rows(rows, cols)) {
    note("half_warp", "aligned rows of 72-124 floats at 0.8-1.05 waves of 16-lane groups: one "
                      "row a group, two float4 a lane");
    return launch_one_row_per_group<16, 2, true>(x, y, rows, cols, stream);
  }
  if (takes_tiles(aligned, rows, cols, device_info().sms)) {
    note("tiles", "many short rows that lose to their own head and tail: tiles of whole rows "
                  "copied through shared memory in float4");
    switch (tile_group(cols)) {
      case 1: return launch_tiles<1, 2, 16>(x, y, rows, cols, stream);  // N = 1 took "single"
      case 2: return launch_tiles<2, 9, 16>(x, y, rows, cols, stream);
      case 4: return launch_tiles<4, 9, 16>(x, y, rows, cols, stream);
      case 8: return launch_tiles<8, 9, 16>(x, y, rows, cols, stream);
      default: return launch_tiles<16, 9, 9>(x, y, rows, cols, stream);
    }
  }
  if (slots <= 256 * 16) {  // sub_warp, warp, block: the row in registers
    if (aligned) return launch_in_registers<true>(slots, x, y, rows, cols, stream);
    return launch_in_registers<false>(slots, x, y, rows, cols, stream);
  }
  if (slots <= device_info().cache_slots) {
    note("smem_block", "rows past a block's registers that one SM's shared memory holds, where "
                       "no split takes them: a block a row in shared memory");
    const KernelFn kernel = smem_block_kernel<kLongRowThreads>;
    allow_cache_bytes(kernel);
    if (recording()) name_kernel("smem_block: 512 threads, persistent");
    return launch_persistent(kernel, kLongRowThreads, (slots + 8) * sizeof(float4), rows, x, y,
                             rows, cols, stream);
  }
  note("two_pass", "rows longer than any split or one SM's shared memory holds: a block a row, "
                   "read twice");
  launch_two_pass<4>(x, y, rows, cols, stream);
}

int path_d_blocks_per_sm(int64_t slots) {
  const KernelFn kernel = smem_block_kernel<kLongRowThreads>;
  allow_cache_bytes(kernel);
  int blocks = 0;
  FS_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kernel, kLongRowThreads, static_cast<size_t>(slots + 8) * sizeof(float4)));
  return blocks;
}

int64_t path_d_pair_slots() { return device_info().pair_slots; }

}  // namespace fastsoftmax::detail
