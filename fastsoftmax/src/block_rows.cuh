// SPDX-License-Identifier: MIT
// fastsoftmax: `block`, a block a row, the row in registers (docs/library.md, "Rows of a warp or
// a block").
//
// `warp` a block wide: thread t holds body slots t, t + kThreads, t + 2*kThreads, ... (kPacks
// float4), and threads 0-2 the head and tail elements, loaded straight from global memory, all
// before any is used; then the row's max, one exp per element against it, the row's sum (each a
// block_all_reduce: shuffles, one value per warp through shared memory, one barrier), the store. No
// shared-memory copy of the row. Two or more blocks share an SM, so one loads while another
// reduces.
//   With at most one row an SM (kOneBarrier: 128x4096), nothing runs under a block's chain from
// its last load to its stores, and the chain is the kernel's tail. There each warp takes its own
// pair instead (its max by one redux.sync, exps against it, its sum by a butterfly), one pair a
// warp goes through shared memory behind one barrier, and every thread merges the pairs and
// scales its exps by the factor onto the row's max and sum: 128x4096 5.22-5.31 us against
// 5.34-5.54 (H100), but up to 3% slower on 4096 rows of 1.3K-8K columns, where blocks overlap
// (each thread also takes one exp per warp to merge).
#pragma once

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace fastsoftmax::detail {

// Launched one block a row, not as a persistent grid: the hardware's block scheduler, which hands
// an SM a new row as soon as one of its blocks finishes, beat a persistent grid that deals rows
// out in a fixed order by 3-6% at 4K-16K columns (H100). The loop still makes any grid correct.
// kAligned: every row starts on a 16-byte boundary and N % 4 == 0 (no head or tail).
// kOneBarrier: the chain of one barrier (see the header), for at most one row an SM.
template <int kThreads, int kPacks, bool kAligned, bool kOneBarrier = false>
__global__ void __launch_bounds__(kThreads, 2)
    register_block_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float reduce_max[kThreads / kWarpSize], reduce_sum[kThreads / kWarpSize];
  __shared__ float2 pairs[kOneBarrier ? 2 : 1][kThreads / kWarpSize];  // by row parity
  const int tid = threadIdx.x;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  int parity = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const RowSplit<4, kAligned> r(lead, row, cols);
    const float4* in = r.body_of(x) + tid;
    const int left = r.body - tid;  // slot p of this thread is in the row when p * kThreads < left
    float v[kPacks][4], head[1], tail[1];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) load_item(in + p * kThreads, p * kThreads < left, v[p]);
    load_edges(x, r, tid, kThreads, head, tail);

    const float thread_max = fmaxf(max_of(v), fmaxf(head[0], tail[0]));
    float inv_sum;  // with kOneBarrier, the factor: exps against the warp's max onto the row's
    if constexpr (kOneBarrier) {
      // The warp's pair: exps against its max (against 0 where it saw only -inf).
      const float warp_top = warp_max(thread_max);
      const float base = warp_top == -INFINITY ? 0.f : warp_top;
      const float warp_sum = group_all_reduce<kWarpSize, false>(
          exp_in_place(v, base) + exp_in_place(head, base) + exp_in_place(tail, base));
      float row_max, row_sum;
      block_merge_warp_pairs<kThreads>(warp_top, warp_sum, pairs[parity], row_max, row_sum);
      inv_sum = part_factor(warp_top, row_max, row_sum);
    } else {
      const float max_val = block_all_reduce<kThreads, true>(thread_max, reduce_max);
      const float thread_sum =
          exp_in_place(v, max_val) + exp_in_place(head, max_val) + exp_in_place(tail, max_val);
      inv_sum = reciprocal(block_all_reduce<kThreads, false>(thread_sum, reduce_sum));
    }
    float4* out = r.body_of(y) + tid;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      scale(v[p], inv_sum);
      if (p * kThreads < left) store_item(out + p * kThreads, v[p]);
    }
    scale(head, inv_sum);
    scale(tail, inv_sum);
    store_edges(y, r, tid, kThreads, head, tail);
  }
}

}  // namespace fastsoftmax::detail
