// SPDX-License-Identifier: MIT
// fastsoftmax: `smem_block`, `two_pass` and `two_pass_scalar`, the lessons' paths for rows longer
// than a block holds in registers, kept as fallbacks (docs/library.md, "Fallbacks").
//
// Barely tuned (only the row's line offset): with clusters, the split paths (split.h) take most
// long rows. `smem_block` keeps the row in shared memory and reads DRAM once; `two_pass`, for rows
// too long even for that, reads the row twice. Both are persistent (grid-stride over rows):
// `smem_block` copies all of a thread's slots by cp.async before using any, `two_pass` loads
// kBatch slots a thread before using any.
#pragma once

#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace fastsoftmax::detail {

constexpr int kBatch = 8;
constexpr int kLongRowThreads = 512;

// `smem_block`: a block a row, the row's body cached in shared memory (dynamic, 16 bytes a slot),
// its head and tail in the registers of threads 0-2. Thread t writes and reads back only its own
// slots t, t + kThreads, ..., so the cache needs no barrier between rows as long as rows start at
// the same place in it; the one barrier a row is the (max, sum) reduction's. Rows start at
// line_shift (row_split.cuh: 4096x32771 from 0.87 to 0.91 of memcpy, H100), which changes between
// rows whose starts differ modulo 128 bytes; where it changes, a barrier first waits until every
// thread has read the last row.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    smem_block_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float2 pairs[2][kThreads / kWarpSize];
  extern __shared__ float4 cache[];
  const int tid = threadIdx.x;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  const uint32_t cache_at = static_cast<uint32_t>(__cvta_generic_to_shared(cache));
  int last_shift = -1;
  int parity = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const RowSplit<4> r(lead, row, cols);
    const float4* in = r.body_of(x);
    const int shift = line_shift(in, cache_at);
    if (shift != last_shift && last_shift >= 0) __syncthreads();  // the same for every thread
    last_shift = shift;
    float4* const cache_row = cache + shift;
    float head[1], tail[1];
    load_edges(x, r, tid, kThreads, head, tail);
    // Pass 1, DRAM to shared memory: every body slot of this thread copied by cp.async (16-byte
    // asynchronous copies that bypass registers, so all of them are in flight at once), then the
    // thread waits for its own copies and takes their max.
    for (int s = tid; s < r.body; s += kThreads) __pipeline_memcpy_async(cache_row + s, in + s, 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    float max_val = fmaxf(head[0], tail[0]);
    for (int s = tid; s < r.body; s += kThreads) {
      const float4 c = cache_row[s];
      max_val = fmaxf(max_val, fmaxf(fmaxf(c.x, c.y), fmaxf(c.z, c.w)));
    }
    // The thread's sum against its own max. A -inf adds exactly 0; it is skipped because with a
    // thread max of -inf it would add exp(-inf - -inf) = NaN.
    const auto term = [&](float e) { return e == -INFINITY ? 0.f : exp_(e - max_val); };
    float sum = term(head[0]) + term(tail[0]);
    for (int s = tid; s < r.body; s += kThreads) {
      const float4 c = cache_row[s];
      sum += term(c.x) + term(c.y) + term(c.z) + term(c.w);
    }
    block_reduce_pair<kThreads>(max_val, sum, pairs[parity]);
    // Pass 2, from shared memory to DRAM.
    const float inv_sum = reciprocal(sum);
    float4* out = r.body_of(y);
    for (int s = tid; s < r.body; s += kThreads) {
      const float4 c = cache_row[s];
      out[s] = make_float4(exp_(c.x - max_val) * inv_sum, exp_(c.y - max_val) * inv_sum,
                           exp_(c.z - max_val) * inv_sum, exp_(c.w - max_val) * inv_sum);
    }
    exp_in_place(head, max_val);
    exp_in_place(tail, max_val);
    scale(head, inv_sum);
    scale(tail, inv_sum);
    store_edges(y, r, tid, kThreads, head, tail);
  }
}

// `two_pass`, and `two_pass_scalar` for x and y of different offsets within 16 bytes (kVec = 1,
// no head or tail): a block a row in two passes over global memory. Pass 1 folds each batch into
// an online (max, sum): the batch max, the batch sum against it, one merge (two rescaling exps
// per batch, not per element). Pass 2 reads the row again (from L2 when it is still there),
// normalises and stores.
template <int kThreads, int kVec>
__global__ void __launch_bounds__(kThreads)
    two_pass_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float2 pairs[2][kThreads / kWarpSize];
  const int tid = threadIdx.x;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  int parity = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const RowSplit<kVec> r(lead, row, cols);
    const auto in = r.body_of(x);
    const auto out = r.body_of(y);
    float head[1], tail[1];
    load_edges(x, r, tid, kThreads, head, tail);
    float max_val = fmaxf(head[0], tail[0]);
    float sum = (head[0] == -INFINITY ? 0.f : exp_(head[0] - max_val)) +
                (tail[0] == -INFINITY ? 0.f : exp_(tail[0] - max_val));
    for (int64_t s0 = tid; s0 < r.body; s0 += kThreads * kBatch) {
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        load_item(in + s0 + k * kThreads, k * kThreads < r.body - s0, v[k]);
      const float batch_max = max_of(v);
      float batch_sum = 0.f;  // -inf skipped, as in smem_block_kernel
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          batch_sum += v[k][j] == -INFINITY ? 0.f : exp_(v[k][j] - batch_max);
      }
      merge(max_val, sum, batch_max, batch_sum);
    }
    block_reduce_pair<kThreads>(max_val, sum, pairs[parity]);
    const float inv_sum = reciprocal(sum);
    for (int64_t s0 = tid; s0 < r.body; s0 += kThreads * kBatch) {
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        load_item(in + s0 + k * kThreads, k * kThreads < r.body - s0, v[k]);
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        exp_in_place(v[k], max_val);
        scale(v[k], inv_sum);
        if (k * kThreads < r.body - s0) store_item(out + s0 + k * kThreads, v[k]);
      }
    }
    exp_in_place(head, max_val);
    exp_in_place(tail, max_val);
    scale(head, inv_sum);
    scale(tail, inv_sum);
    store_edges(y, r, tid, kThreads, head, tail);
  }
}

}  // namespace fastsoftmax::detail
