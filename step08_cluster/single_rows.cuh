// SPDX-License-Identifier: MIT
// step08_cluster, path (a1): rows of one float.
//
// With N = 1 the rows lie back to back: the matrix is one vector of M floats, each its own row.
// Path (a) gives each row a lane that loads and stores one float, and the tiles of (a') stage
// 4096 rows a block through shared memory; here the vector is split as one row would be
// (row_split.cuh: up to 3 floats before the first 16-byte boundary, float4 slots, up to 3 after)
// and every float4 slot is four rows, read and written in one access each, as a copy would.
//
// Each element goes through the same arithmetic as a row of one in the other paths (its max, the
// exp against it, the reciprocal of the sum, the product), so that the result is bit for bit what
// they give: 1 for a finite x, NaN for an infinite or NaN one.
#pragma once

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace step08_cluster {

constexpr int kSingleThreads = 256;

__device__ __forceinline__ float softmax_of_one(float x) {
  float v[1] = {x};
  const float max_val = max_of(v);
  const float inv_sum = reciprocal(exp_in_place(v, max_val));
  return v[0] * inv_sum;
}

// kPacks float4 slots a thread per round, kThreads apart; the loop makes any grid correct.
template <int kPacks, int kThreads = kSingleThreads>
__global__ void __launch_bounds__(kThreads)
    single_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows) {
  const RowSplit<4> s(lead_of(x), 0, rows);  // y's lead is x's (the launcher checks)
  const float4* in = s.body_of(x);
  float4* out = s.body_of(y);
  // The loose floats first: block 0 takes the head, the last block the tail. With both loaded
  // by block 0 after its body, 9826x1 ran in 4.16 us, 3.90-3.97 this way (docs/notes/step08.md,
  // change 18).
  const int t = threadIdx.x;
  const bool head = blockIdx.x == 0 && t < s.head;
  const bool tail = blockIdx.x == gridDim.x - 1 && t < s.tail;
  const float head_x = head ? x[t] : 0.f;
  const float tail_x = tail ? x[s.tail_at + t] : 0.f;
  constexpr int kPerBlock = kThreads * kPacks;
  for (int64_t first = int64_t(blockIdx.x) * kPerBlock + t; first < s.body;
       first += int64_t(gridDim.x) * kPerBlock) {
    float4 v[kPacks];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t i = first + p * kThreads;
      if (i < s.body) v[p] = in[i];
    }
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t i = first + p * kThreads;
      if (i < s.body)
        out[i] = make_float4(softmax_of_one(v[p].x), softmax_of_one(v[p].y),
                             softmax_of_one(v[p].z), softmax_of_one(v[p].w));
    }
  }
  if (head) y[t] = softmax_of_one(head_x);
  if (tail) y[s.tail_at + t] = softmax_of_one(tail_x);
}

}  // namespace step08_cluster
