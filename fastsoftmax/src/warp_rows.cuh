// SPDX-License-Identifier: MIT
// fastsoftmax: `sub_warp`, `half_warp` and `warp`, a group of lanes a row with the row in
// registers, and `strided`, a warp a row in 4-byte accesses (docs/library.md, "Short rows" and
// "Rows of a warp or a block").
//
// A group of kGroup lanes (1..32, a power of two) owns a row; lane l of the group holds body slots
// l, l + kGroup, l + 2*kGroup, ... (kPacks float4), so each pack of the group is one contiguous,
// coalesced access, and head and tail elements l, l + kGroup, ... (row_split.cuh). A warp
// holds 32 / kGroup rows. Every load of a row is issued before any is used; the max and the sum are
// plain shuffles inside the group (the max is known exactly before any exponential is taken); the
// exponentials stay in registers for the store. No shared memory, no barrier, one exp per element.
#pragma once

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace fastsoftmax::detail {

// Four independent warps per block: small blocks pack the SMs evenly.
constexpr int kWarpThreads = 128;
// `warp` holds up to 9 float4 a lane (N <= 1155): past that the registers run out and `block`,
// a 128-thread block a row, measured faster. Unaligned rows take `block` past 8
// (row_launchers.cuh, launch_in_registers).
constexpr int kWarpMaxPacks = 9;

// `strided` holds up to 32 floats a lane: rows of up to 1024 floats.
constexpr int kStridedMaxPer = 32;

// The resident blocks per SM ptxas is asked to allow for: each lane needs a register per float it
// holds plus about 24 for addresses, indices and sums, out of 64K registers per SM. Left to
// itself ptxas picked too small a budget at 12 float4 per lane and spilled; this gives it just
// enough, so occupancy stays as high as the row allows.
constexpr int warp_min_blocks(int floats_per_lane) {
  const int blocks = 65536 / (kWarpThreads * (floats_per_lane + 24));
  return blocks < 16 ? blocks : 16;
}

// The part of a row one lane holds: kPacks body slots, and its head and tail elements.
template <int kGroup, int kPacks>
struct LaneRow {
  static constexpr int kEdges = (3 + kGroup - 1) / kGroup;
  float body[kPacks][4];
  float head[kEdges], tail[kEdges];
};

// Row `row` as this lane sees it; a row past the end is empty (nothing loaded or stored).
template <bool kAligned>
__device__ __forceinline__ RowSplit<4, kAligned> lane_split(int lead, int64_t row, int rows,
                                                            int cols) {
  RowSplit<4, kAligned> r(lead, row < rows ? row : 0, cols);
  if (row >= rows) r.head = r.body = r.tail = 0;
  return r;
}

template <int kGroup, int kPacks, bool kAligned>
__device__ __forceinline__ void load_group_row(const float* x, int lead, int64_t row, int rows,
                                               int cols, int glane, LaneRow<kGroup, kPacks>& v) {
  const auto r = lane_split<kAligned>(lead, row, rows, cols);
  const float4* body = r.body_of(x) + glane;
  const int left = r.body - glane;  // slot k of this lane is in the row when k * kGroup < left
#pragma unroll
  for (int k = 0; k < kPacks; ++k) load_item(body + k * kGroup, k * kGroup < left, v.body[k]);
  load_edges(x, r, glane, kGroup, v.head, v.tail);
}

// The softmax of the row a group holds (as load_group_row left it), stored to y. All lanes of
// the warp must call it together: the shuffles stay inside each group (xor offsets < kGroup).
template <int kGroup, int kPacks, bool kAligned>
__device__ __forceinline__ void softmax_group_row(LaneRow<kGroup, kPacks>& v, float* y, int lead,
                                                  int64_t row, int rows, int cols, int glane) {
  const float lane_max = fmaxf(max_of(v.body), fmaxf(max_of(v.head), max_of(v.tail)));
  const float max_val = group_all_reduce<kGroup, true>(lane_max);
  const float lane_sum =
      exp_in_place(v.body, max_val) + exp_in_place(v.head, max_val) + exp_in_place(v.tail, max_val);
  const float inv_sum = reciprocal(group_all_reduce<kGroup, false>(lane_sum));
  const auto r = lane_split<kAligned>(lead, row, rows, cols);
  float4* body = r.body_of(y) + glane;
  const int left = r.body - glane;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    scale(v.body[k], inv_sum);
    if (k * kGroup < left) store_item(body + k * kGroup, v.body[k]);
  }
  scale(v.head, inv_sum);
  scale(v.tail, inv_sum);
  store_edges(y, r, glane, kGroup, v.head, v.tail);
}

// kNextInFlight = false: load a row, reduce it, store it, take the next.
// kNextInFlight = true: each group takes at least two rows (the launcher asks for two rounds) and
// issues the loads of its next row before it reduces the current one, so the shuffles, the
// exponentials and the stores of one row happen while the next is on its way. Twice the
// registers.
// The loop runs over warp-uniform row bases, so all 32 lanes reach every shuffle; a group whose
// row is past the end takes part with padding and touches no memory. Persistent: grid-stride.
// With the next row in flight ptxas picks its own register budget (asking for more blocks made
// it spill at 9 slots a lane).
// kAligned: every row starts on a 16-byte boundary and N % 4 == 0, so there is no head or tail.
template <int kGroup, int kPacks, bool kNextInFlight, bool kAligned>
__global__ void __launch_bounds__(kWarpThreads,
                                  kNextInFlight ? 1
                                                : warp_min_blocks(kPacks * 4 + (kAligned ? 0 : 6)))
    warp_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  constexpr int kRowsPerWarp = kWarpSize / kGroup;
  constexpr int kWarpsPerBlock = kWarpThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int glane = lane % kGroup;
  const int64_t warp_id = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t stride = int64_t(gridDim.x) * kWarpsPerBlock * kRowsPerWarp;
  const int group = lane / kGroup;  // which of the warp's rows
  const int lead = lead_of(x);      // y's is the same (the launcher checks)

  LaneRow<kGroup, kPacks> v;
  if constexpr (kNextInFlight) {
    load_group_row<kGroup, kPacks, kAligned>(x, lead, warp_id * kRowsPerWarp + group, rows, cols,
                                             glane, v);
  }
  for (int64_t base = warp_id * kRowsPerWarp; base < rows; base += stride) {
    const int64_t row = base + group;
    if constexpr (kNextInFlight) {
      LaneRow<kGroup, kPacks> next;
      load_group_row<kGroup, kPacks, kAligned>(x, lead, row + stride, rows, cols, glane, next);
      softmax_group_row<kGroup, kPacks, kAligned>(v, y, lead, row, rows, cols, glane);
      v = next;
    } else {
      load_group_row<kGroup, kPacks, kAligned>(x, lead, row, rows, cols, glane, v);
      softmax_group_row<kGroup, kPacks, kAligned>(v, y, lead, row, rows, cols, glane);
    }
  }
}

// `strided`: a warp a row, lane l holding elements l, l + 32, l + 64, ... (kPer of them), each a
// 4-byte access predicated on its column, so there is no head, no tail and nothing asked of the
// row's alignment. It takes rows of 33-1024 floats on matrices small enough to be loaded all at
// once (short_rules.h, strided_reach and strided_below_band), one row a warp. There the time is
// the chain from the launch to the last store, not the instruction count: this mapping was up
// to 5% faster than the float4 slots of `sub_warp` and `warp` at 13 such shapes, aligned rows
// included, and ahead of cuDNN, which uses the same layout, at all of them.
template <int kPer>
__global__ void __launch_bounds__(kWarpThreads)
    strided_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * (kWarpThreads / kWarpSize) + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // the whole warp: row is the same in all its lanes
  const float* in = x + int64_t(row) * cols + lane;
  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    v[i] = lane + kWarpSize * i < cols ? in[kWarpSize * i] : -INFINITY;
  const float max_val = group_all_reduce<kWarpSize, true>(max_of(v));
  const float inv_sum = reciprocal(group_all_reduce<kWarpSize, false>(exp_in_place(v, max_val)));
  float* out = y + int64_t(row) * cols + lane;
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (lane + kWarpSize * i < cols) out[kWarpSize * i] = v[i] * inv_sum;
}

}  // namespace fastsoftmax::detail
