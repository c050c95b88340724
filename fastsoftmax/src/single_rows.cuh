// SPDX-License-Identifier: MIT
// fastsoftmax: `single` and `pairs`, rows of one float and of two (docs/library.md, "Short rows").
//
// With N = 1 the rows lie back to back: the matrix is one vector of M floats, each its own row.
// A lane a row (`sub_warp`) or a tile slot (`tiles`) leaves each lane 4-28 bytes in flight
// (0.57-0.94 of memcpy, H100). Here the vector is split as one row would be (row_split.cuh: up
// to 3 floats before the first 16-byte boundary, float4 slots, up to 3 after) and every float4
// slot is four rows, read and written in one access each, as a copy would.
// With N = 2 and x on an 8-byte boundary the same split of the 2M floats cuts no row: the head
// and the tail are a row each or nothing, and every float4 slot is two rows.
//
// Each element goes through the same arithmetic as a row of one or two in the other paths (the
// row's max, the exp against it, the reciprocal of the sum, the product), so that the result is
// bit for bit what they give: for N = 1, 1 for a finite x and NaN for an infinite or NaN one.
#pragma once

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace fastsoftmax::detail {

constexpr int kSingleThreads = 256;

__device__ __forceinline__ float softmax_of_one(float x) {
  float v[1] = {x};
  const float max_val = max_of(v);
  const float inv_sum = reciprocal(exp_in_place(v, max_val));
  return v[0] * inv_sum;
}

// The row (a, b), in place.
__device__ __forceinline__ void softmax_of_two(float& a, float& b) {
  float v[2] = {a, b};
  const float max_val = max_of(v);
  const float inv_sum = reciprocal(exp_in_place(v, max_val));
  a = v[0] * inv_sum;
  b = v[1] * inv_sum;
}

// The rows of one float4 slot: four rows of one float, or two of two.
template <int kCols>
__device__ __forceinline__ float4 softmax_of_slot(float4 v) {
  if constexpr (kCols == 1) {
    return make_float4(softmax_of_one(v.x), softmax_of_one(v.y), softmax_of_one(v.z),
                       softmax_of_one(v.w));
  } else {
    softmax_of_two(v.x, v.y);
    softmax_of_two(v.z, v.w);
    return v;
  }
}

// kPacks float4 slots a thread per round, kThreads apart; the loop makes any grid correct.
// kCols = 1: `rows` rows of one float; kCols = 2: of two, x (and y) on an 8-byte boundary, and
// 2 * rows below 2^31.
template <int kPacks, int kCols = 1, int kThreads = kSingleThreads>
__global__ void __launch_bounds__(kThreads)
    single_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows) {
  static_assert(kCols == 1 || kCols == 2, "rows of one or two floats");
  const RowSplit<4> s(lead_of(x), 0, rows * kCols);  // y's lead is x's (the launcher checks)
  const float4* in = s.body_of(x);
  float4* out = s.body_of(y);
  // The loose floats first: block 0 takes the head, the last block the tail, so neither waits
  // behind a body (9826x1: 3.90-3.97 us, against 4.16 with both loaded by block 0 after its
  // body). For kCols = 2 the head and the tail are one row of two floats or none: thread 0 takes
  // each.
  const int t = threadIdx.x;
  const int edge_threads = kCols == 1 ? kThreads : 1;
  const bool head = blockIdx.x == 0 && t < edge_threads && t < s.head;
  const bool tail = blockIdx.x == gridDim.x - 1 && t < edge_threads && t < s.tail;
  float head_x[kCols], tail_x[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    head_x[c] = head ? x[t + c] : 0.f;
    tail_x[c] = tail ? x[s.tail_at + t + c] : 0.f;
  }
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
      if (i < s.body) out[i] = softmax_of_slot<kCols>(v[p]);
    }
  }
  if constexpr (kCols == 1) {
    if (head) y[t] = softmax_of_one(head_x[0]);
    if (tail) y[s.tail_at + t] = softmax_of_one(tail_x[0]);
  } else {
    if (head) {
      softmax_of_two(head_x[0], head_x[1]);
      y[0] = head_x[0];
      y[1] = head_x[1];
    }
    if (tail) {
      softmax_of_two(tail_x[0], tail_x[1]);
      y[s.tail_at] = tail_x[0];
      y[s.tail_at + 1] = tail_x[1];
    }
  }
}

}  // namespace fastsoftmax::detail
