// SPDX-License-Identifier: MIT
// fastsoftmax: the parts of a split row, for every split kernel (split_kernels.cuh,
// split_small.cuh): which part a CTA takes, and how a part is fetched and stored.
//
// A row of N floats is cut into K parts, one a CTA. CTA k holds body slots [k*chunk,
// (k+1)*chunk) of the row in registers; part 0 also holds the head and part K-1 the tail
// (row_split.cuh). Every element is read once and written once:
//
//   row:    | h | part 0 slots     | part 1 slots     | ... | part K-1 slots | t |
//             CTA 0               CTA 1                     CTA K-1
//   each CTA: its (max, sum) pair -> exchange the K pairs -> the row's (max, sum) -> scale, store
//
// The exchange (split_exchange.cuh) is the one step across SMs a row: through distributed shared
// memory in a cluster (`cluster`, `cluster_held`), through global memory in a cooperative grid
// (`grid`, `grid_held`), whose launch makes every CTA resident so that a CTA may spin on the
// others. The persistent kernels keep the next row's part in flight in a shared-memory stage while
// they reduce and write this one. `cluster` fills the stage with one bulk copy (2048x65536: 0.95
// of memcpy against 0.91 with per-thread copies, H100); `grid` keeps per-thread cp.async, since
// with the bulk copy it measured slower (0.78 against 0.91 at 512x262144; why is open).
// docs/library.md, "Long rows: clusters" and "Few rows and very long rows: the grid".
#pragma once

#include <cooperative_groups.h>
#include <cuda/atomic>
#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "mbarrier.cuh"
#include "reduce.cuh"
#include "row_split.cuh"
#include "split_sizes.h"

namespace fastsoftmax::detail {

// The grid paths' exchange area (GridExchange): a pair per CTA (two sets, by row parity) and a
// counter and a generation per group. Zero at load; every barrier leaves its counter at zero.
__device__ float2 g_split_pairs[2][kMaxGridCtas];
__device__ unsigned g_split_arrived[kMaxGridCtas];
__device__ unsigned g_split_generation[kMaxGridCtas];

// Which part of which rows this CTA takes: part `index` of `parts` (K) of rows group, group +
// groups, ... (a cluster or a group of K CTAs per row; `group` < groups is also its number).
struct Part {
  int index, parts;
  int64_t group, groups;
  int first;  // the part's first body slot, in every row
};

// Part k of `parts`, where the launch gives each group `parts` consecutive CTAs.
__device__ __forceinline__ Part part_of_block(int k, int parts, int chunk) {
  return Part{k, parts, blockIdx.x / parts, gridDim.x / parts, k * chunk};
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// In a cluster launch: the CTA's rank in its cluster is its part, the cluster's size K.
__device__ __forceinline__ Part cluster_part(int chunk) {
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  return part_of_block(static_cast<int>(cluster.block_rank()),
                       static_cast<int>(cluster.num_blocks()), chunk);
}
#endif

// The part of row `row` this CTA holds: its slots (count <= chunk, may be 0) and edges.
template <bool kAligned = false>
struct PartRowOf {
  RowSplit<4, kAligned> r;
  int count;
  __device__ __forceinline__ PartRowOf(int lead, int64_t row, int cols, const Part& p, int chunk)
      : r(lead, row, cols) {
    count = max(0, min(chunk, r.body - p.first));
  }
};
using PartRow = PartRowOf<false>;

// Stores this thread's slots of a part (slot s = lined_slot(t, k) of `out`, those below `count`),
// scaled by `factor`.
template <int kPacks, int kThreads>
__device__ __forceinline__ void store_part(float4* out, const float (&v)[kPacks][4], float factor,
                                           int in_line, int count) {
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int s = lined_slot<kPacks, kThreads>(threadIdx.x, k, in_line);
    if (s < count)
      out[s] = make_float4(v[k][0] * factor, v[k][1] * factor, v[k][2] * factor,
                           v[k][3] * factor);
  }
}

// Issues this thread's copies of its slots of a row into `stage` (slot s = lined_slot(t, k) at
// index line_shift + s), and loads its head or tail element (threads 0-2 of the first and last
// part).
template <int kPacks>
__device__ __forceinline__ void fetch_part(const float* x, int lead, int64_t row, int rows,
                                           int cols, const Part& p, int chunk, uint32_t stage,
                                           float& edge) {
  edge = -INFINITY;
  if (row >= rows) return;
  const PartRow pr(lead, row, cols, p, chunk);
  const int t = threadIdx.x;
  const float4* first = pr.r.body_of(x) + p.first;
  const uint32_t to = stage + line_shift(first, stage) * uint32_t(sizeof(float4));
  const int in_line = slot_in_line(first);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int s = lined_slot<kPacks, kSplitThreads>(t, k, in_line);
    copy16_async(to + s * uint32_t(sizeof(float4)), first + s, s < pr.count);
  }
  if (p.index == 0 && t < pr.r.head) edge = x[pr.r.start + t];
  if (p.index == p.parts - 1 && t < pr.r.tail) edge = x[pr.r.start + pr.r.tail_at + t];
}

// The same part staged by the bulk-copy engine (`cluster`): thread 0 tells the stage's barrier to
// expect the part's bytes and issues one cp.async.bulk for all of them, in place of 512 threads'
// kPacks copies each; threads 0-2 load the edges. The body starts on a 16-byte boundary and is
// whole float4, as the bulk copy requires; it lands line_shift slots into the stage. A row past
// the end issues nothing (no thread waits).
template <int kPacks>
__device__ __forceinline__ void fetch_part_bulk(const float* x, int lead, int64_t row, int rows,
                                                int cols, const Part& p, int chunk,
                                                uint32_t stage, uint32_t full, float& edge) {
  edge = -INFINITY;
  if (row >= rows) return;
  const PartRow pr(lead, row, cols, p, chunk);
  const int t = threadIdx.x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (t == 0) {
    const uint32_t bytes = static_cast<uint32_t>(pr.count) * uint32_t(sizeof(float4));
    const float4* first = pr.r.body_of(x) + p.first;
    const uint32_t to = stage + line_shift(first, stage) * uint32_t(sizeof(float4));
    bulk_copy_counted(to, first, bytes, full);
  }
#endif
  if (p.index == 0 && t < pr.r.head) edge = x[pr.r.start + t];
  if (p.index == p.parts - 1 && t < pr.r.tail) edge = x[pr.r.start + pr.r.tail_at + t];
}

}  // namespace fastsoftmax::detail
