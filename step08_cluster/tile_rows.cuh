// SPDX-License-Identifier: MIT
// step08_cluster, path (a'): unaligned short rows, a tile of consecutive rows staged through
// shared memory.
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
// Then each row is reduced by a warp reading it from shared memory (consecutive lanes,
// consecutive words), the results are written back in place, and the tile leaves as it
// came, float4 by float4. Measured (docs/notes/step07.md, change 15) it serves unaligned rows of
// 65-131 floats better than the register path (0.90 of memcpy against 0.82 at 65536x127) and
// shorter ones worse (0.82 against 0.85 at 65536x61); aligned rows of any length worse still.
#pragma once

#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace step08_cluster {

constexpr int kTileThreads = 256;
constexpr int kTilePacks = 4;                          // float4 per thread per copy
constexpr int kTileSlots = kTileThreads * kTilePacks;  // 16 KB of rows per tile
constexpr int kTileFloats = 4 * kTileSlots;            // the longest tile

// Rows per tile for rows of `cols` floats (cols <= kTileFloats): as many as fit, rounded down to
// a whole number of rounds of the block's warps (a warp per row) when that leaves one round.
inline int tile_rows(int cols) {
  constexpr int kWarps = kTileThreads / kWarpSize;
  const int fit = kTileFloats / cols;
  return fit >= kWarps ? fit / kWarps * kWarps : fit;
}

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

// The softmax of every row of a tile, in place: warp w takes rows w, w + 8, ...; lane l holds
// the row's elements l, l + 32, ... (kPerLane of them, -inf past the row's end).
template <int kPerLane>
__device__ __forceinline__ void softmax_tile(const Tile& t, int cols, float4* buf) {
  constexpr int kWarps = kTileThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  float* const tile_f = reinterpret_cast<float*>(buf) + t.lead;
  for (int i = threadIdx.x / kWarpSize; i < t.nrows; i += kWarps) {
    float* row = tile_f + i * cols;
    float v[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      v[j] = c < cols ? row[c] : -INFINITY;
    }
    const float max_val = group_all_reduce<kWarpSize, true>(max_of(v));
    const float inv_sum = 1.f / group_all_reduce<kWarpSize, false>(exp_in_place(v, max_val));
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int c = lane + j * kWarpSize;
      if (c < cols) row[c] = v[j] * inv_sum;
    }
  }
}

// One tile per block (the loop makes any grid correct): copy in, one barrier, the rows' softmax in
// place, one barrier, copy out. A warp per row, each lane holding kPerLane elements:
// N <= 32 * kPerLane. Measured against a persistent version with two buffers (the next
// tile's copy in flight during this one's softmax): that one was slower (docs/notes/step07.md,
// change 15).
template <int kPerLane>
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
    softmax_tile<kPerLane>(tile, cols, buffer);
    __syncthreads();
    copy_out(y, tile, buffer);
    __syncthreads();  // the buffer is read out before the next tile's copy overwrites it
  }
}

}  // namespace step08_cluster
