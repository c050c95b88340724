// SPDX-License-Identifier: MIT
// step07_persistent, path (c): a block per row, the row in registers.
//
// Path (b) a block wide: thread t holds body slots t, t + kThreads, t + 2*kThreads, ... (kPacks
// float4), and threads 0-2 the head and tail elements, loaded straight from global memory, all
// before any is used; then the row's max, one exp per element against it, the row's sum (each a
// block_all_reduce: shuffles, one value per warp through shared memory, one barrier), the store. No
// shared-memory copy of the row. Two or more blocks share an SM, so one loads while another
// reduces.
#pragma once

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace step07_persistent {

// Launched one block per row, not as a persistent grid: measured, the hardware's block scheduler,
// which hands an SM a new row as soon as one of its blocks finishes, beat a persistent grid that
// deals rows out in a fixed order by 3-6% at 4K-16K columns (docs/notes/step07.md, change 7).
// The loop still makes any grid correct.
// kAligned: every row starts on a 16-byte boundary and N % 4 == 0 (no head or tail).
template <int kThreads, int kPacks, bool kAligned>
__global__ void __launch_bounds__(kThreads, 2)
    register_block_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float reduce_max[kThreads / kWarpSize], reduce_sum[kThreads / kWarpSize];
  const int tid = threadIdx.x;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const RowSplit<4, kAligned> r(lead, row, cols);
    const float4* in = r.body_of(x) + tid;
    const int left = r.body - tid;  // slot p of this thread is in the row when p * kThreads < left
    float v[kPacks][4], head[1], tail[1];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) load_item(in + p * kThreads, p * kThreads < left, v[p]);
    load_edges(x, r, tid, kThreads, head, tail);

    const float thread_max = fmaxf(max_of(v), fmaxf(head[0], tail[0]));
    const float max_val = block_all_reduce<kThreads, true>(thread_max, reduce_max);
    const float thread_sum =
        exp_in_place(v, max_val) + exp_in_place(head, max_val) + exp_in_place(tail, max_val);
    const float inv_sum = reciprocal(block_all_reduce<kThreads, false>(thread_sum, reduce_sum));
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

}  // namespace step07_persistent
