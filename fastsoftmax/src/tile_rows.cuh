// SPDX-License-Identifier: MIT
// fastsoftmax: `tiles`, for unaligned short rows and aligned rows of an odd number of float4 on
// many rows: a tile of consecutive rows staged through shared memory. Which matrices take it:
// tile_plan.h; docs/library.md, "Short rows".
//
// A row of 127 floats that starts off a 16-byte boundary has 30 or 31 whole 16-byte slots and up
// to 3 + 3 loose floats at its ends: split row by row (row_split.cuh) the loose floats and their
// index arithmetic cost as much as the row itself, and the partial sectors at each row's ends are
// written by two rows. But R consecutive rows are one contiguous stretch of R*N floats. A block
// copies such a tile with float4 accesses (one head and one tail per tile, not per row) into
// shared memory at the same offset from a 16-byte boundary, so that the boundaries of memory and
// of the copy line up:
//
//   global:  |  .  .  h  h |  b  b  b  b |  b  b  b  b | ... |  t  .  .  . |
//   shared:  |  -  -  h  h |  b  b  b  b |  b  b  b  b | ... |  t  -  -  - |
//
// Then each row is reduced by a group of kGroup lanes reading it from shared memory (lane l of a
// group takes the row's elements l, l + G, l + 2G, ...), the results are written back in place,
// and the tile leaves as it came, float4 by float4.
//
// Which rows share a warp decides the banks. Shared memory has 32 banks of 4 bytes, word w in
// bank w % 32; a warp's access is one pass when its 32 lanes hit 32 different banks. The W =
// 32/G groups of a warp read words row*N + l + G*j at step j: G consecutive banks per group,
// starting at row*N. Rows s apart start s*N banks apart, so choose s with s*N = G * odd (mod
// 32): the W groups then start G*0, G*q, G*2q, ... (q odd) banks in, W disjoint windows of G
// banks that tile all 32. For odd N, s = G; in general s = G / gcd(N, G), at most the block's 8
// warps (16 lanes on an odd N, N a multiple of 8 off its boundary, or 2 lanes on N % 8 == 4, keep
// some 2-way conflicts):
//
//   G = 8, N = 127 (s = 8):  warp 0 takes rows 0, 8, 16, 24, starting at banks 0, 24, 16, 8
//                            lanes 0-7 -> banks 0-7   lanes 8-15 -> banks 24-31   and so on
//
// With one lane a row (rows of 2-16 floats; rows of two only off an 8-byte boundary) each lane
// reads its row's words in turn: rows N words apart, conflict-free for odd N, at most 2-way for
// even N off a multiple of 4.
//
// Unaligned rows on the H100, against memcpy: 65536x127 0.99 with 8 lanes a row (0.93 on
// `sub_warp`), 65536x61 0.96 with 4 lanes (0.89), 262144x31 0.99 with 2 lanes (0.89). On few
// tiles `sub_warp` is faster (8192x61: 0.93 against 0.86); tile_plan.h says from how many tiles
// an SM each length takes them.
#pragma once

#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"
#include "tile_plan.h"

namespace fastsoftmax::detail {

constexpr int kTileWarps = kTileThreads / kWarpSize;

// Tile t: rows [t*R, t*R + R) (fewer in the last one), as one row of nrows*cols floats split into
// head, body slots and tail as a row is (row_split.cuh). Its element e is shared-memory float
// lead + e of the buffer, so the body starts on slot 0 (no head) or slot 1.
struct Tile {
  RowSplit<4> s;
  int nrows, lead;
  __device__ __forceinline__ Tile(int x_lead, int64_t t, int rows, int cols, int per_tile)
      : s(0, 0, 0) {
    const int64_t row0 = t * per_tile;
    nrows = static_cast<int>(min(int64_t(per_tile), rows - row0));
    lead = int((unsigned(x_lead) + unsigned(row0) * unsigned(cols)) % 4);
    s = RowSplit<4>(lead, 0, nrows * cols);
    s.start = size_t(row0) * cols;
  }
};

// One tile into a shared-memory buffer by cp.async (asynchronous copies that bypass registers, so
// all of a thread's copies are in flight at once), committed as one batch.
__device__ __forceinline__ void copy_in(const float* x, const Tile& t, float4* buf) {
  const float4* in = t.s.body_of(x);
  float4* body = buf + (t.lead ? 1 : 0);
  float* buf_f = reinterpret_cast<float*>(buf) + t.lead;
  for (int k = threadIdx.x; k < t.s.body; k += kTileThreads)
    __pipeline_memcpy_async(body + k, in + k, sizeof(float4));
  if (threadIdx.x < t.s.head)
    __pipeline_memcpy_async(buf_f + threadIdx.x, x + t.s.start + threadIdx.x, sizeof(float));
  if (threadIdx.x < t.s.tail)
    __pipeline_memcpy_async(buf_f + t.s.tail_at + threadIdx.x,
                            x + t.s.start + t.s.tail_at + threadIdx.x, sizeof(float));
}

__device__ __forceinline__ void copy_out(float* y, const Tile& t, const float4* buf) {
  float4* out = t.s.body_of(y);
  const float4* body = buf + (t.lead ? 1 : 0);
  const float* buf_f = reinterpret_cast<const float*>(buf) + t.lead;
#pragma unroll
  for (int k = 0; k < kTilePacks; ++k) {
    const int slot = threadIdx.x + k * kTileThreads;
    if (slot < t.s.body) out[slot] = body[slot];
  }
  if (threadIdx.x < t.s.head) y[t.s.start + threadIdx.x] = buf_f[threadIdx.x];
  if (threadIdx.x < t.s.tail)
    y[t.s.start + t.s.tail_at + threadIdx.x] = buf_f[t.s.tail_at + threadIdx.x];
}

// The row of each round that this thread's group takes: warp w's W groups take rows s apart
// (the header says why), the warps fill the round in between:
// row = (w % s) + s*k + (w / s)*s*W for group k of warp w, a permutation of 0..8W-1 (s divides 8).
template <int kGroup>
__device__ __forceinline__ int tile_row_of_group(int cols) {
  constexpr int kGroups = kWarpSize / kGroup;  // W, groups per warp
  const int low = min(__ffs(cols) - 1, 3);     // log2 of gcd(N, 8)
  const int s = min(kGroup >> min(low, 31 - __clz(kGroup)), kTileWarps);
  const int w = threadIdx.x / kWarpSize, k = threadIdx.x % kWarpSize / kGroup;
  return w % s + s * k + w / s * s * kGroups;
}

// The softmax of every row of a tile, in place, a group of kGroup lanes per row, kPerLane
// elements a lane: G*(P-1) < N <= G*P, so only a lane's last element can lie past the row's end.
// Every lane runs every round (the shuffles need the whole warp); a group past the tile's last
// row reads and writes nothing.
template <int kGroup, int kPerLane>
__device__ __forceinline__ void softmax_tile(const Tile& t, int cols, float4* buf) {
  constexpr int kRound = kTileThreads / kGroup;
  const int lane = threadIdx.x % kGroup;
  const int mine = tile_row_of_group<kGroup>(cols);
  float* const tile_f = reinterpret_cast<float*>(buf) + t.lead;
  for (int first = 0; first < t.nrows; first += kRound) {
    const int i = first + mine;
    const bool live = i < t.nrows;
    float* row = tile_f + i * cols + lane;
    float v[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const bool in_row = live && (j < kPerLane - 1 || lane + j * kGroup < cols);
      v[j] = in_row ? row[j * kGroup] : -INFINITY;
    }
    const float max_val = group_all_reduce<kGroup, true>(max_of(v));
    const float inv_sum = reciprocal(group_all_reduce<kGroup, false>(exp_in_place(v, max_val)));
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const bool in_row = live && (j < kPerLane - 1 || lane + j * kGroup < cols);
      if (in_row) row[j * kGroup] = v[j] * inv_sum;
    }
  }
}

// One tile a block (the loop makes any grid correct): copy in, one barrier, the rows' softmax in
// place, one barrier, copy out. kGroup lanes a row, each holding kPerLane elements:
// kGroup * (kPerLane - 1) < N <= kGroup * kPerLane. A persistent version with two buffers (the
// next tile's copy in flight during this one's softmax) measured slower.
template <int kGroup, int kPerLane>
__global__ void __launch_bounds__(kTileThreads, 8)
    tile_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                     int per_tile) {
  __shared__ float4 buffer[kTileSlots + 1];  // + 1: a misaligned tile spills into one more slot
  const int lead = lead_of(x);               // y's is the same (the launcher checks)
  for (int64_t t = blockIdx.x; t * per_tile < rows; t += gridDim.x) {
    const Tile tile(lead, t, rows, cols, per_tile);
    copy_in(x, tile, buffer);
    __pipeline_commit();
    __pipeline_wait_prior(0);  // this thread's copies have landed ...
    __syncthreads();           // ... and everyone else's
    softmax_tile<kGroup, kPerLane>(tile, cols, buffer);
    __syncthreads();
    copy_out(y, tile, buffer);
    __syncthreads();  // the buffer is read out before the next tile's copy overwrites it
  }
}

}  // namespace fastsoftmax::detail
