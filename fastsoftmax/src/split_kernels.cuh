// SPDX-License-Identifier: MIT
// fastsoftmax: the split kernels of CTAs of 512 and 1024 threads, each with a shared-memory
// stage: `cluster` (cluster_rows_kernel), `cluster_held` (held_cluster_rows_kernel),
// `grid` (grid_rows_kernel) and `grid_held` (held_rows_kernel). docs/library.md, "Long rows:
// clusters" and "Few rows and very long rows: the grid".
#pragma once

#include "split_exchange.cuh"

namespace fastsoftmax::detail {

// One row per cluster or group per round, the next row's part in flight (split_parts.cuh).
// kPacks: float4 slots per thread (chunk <= kPacks * 512). Dynamic shared memory: kPacks * 512 + 8
// float4, the stage; a row's part starts line_shift slots into it (row_split.cuh). kBulk: the
// stage is filled by one bulk copy (after the block reduction, when every thread has read it),
// else by each thread's own copies. Thread t holds slots lined_slot(t, k) (row_split.cuh), so
// that each warp reads and writes whole 128-byte lines.
template <int kPacks, typename Exchange, bool kBulk>
__device__ __forceinline__ void split_rows(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols, const Part p, int chunk,
                                           const Exchange ex = Exchange{}) {
  extern __shared__ float4 stage[];
  __shared__ float2 warp_pairs[2][kSplitWarps];
  __shared__ ExchangeArea area;
  __shared__ unsigned long long stage_full;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  const int tid = threadIdx.x;
  float next_edge;
  const uint32_t stage_at = shared_at(stage);
  const uint32_t full_at = shared_at(&stage_full);
  if constexpr (kBulk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (tid == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full_at) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
#endif
    __syncthreads();  // the stage's barrier is set up before any copy counts on it or anyone waits
    fetch_part_bulk<kPacks>(x, lead, p.group, rows, cols, p, chunk, stage_at, full_at, next_edge);
  } else {
    fetch_part<kPacks>(x, lead, p.group, rows, cols, p, chunk, stage_at, next_edge);
    __pipeline_commit();
  }
  ex.init(area);
  int64_t use = 0;  // rows this CTA has taken
  for (int64_t row = p.group; row < rows; row += p.groups, ++use) {
    const int parity = static_cast<int>(use & 1);
    const PartRow pr(lead, row, cols, p, chunk);
    // This row's slots: from the stage into registers (each thread reads only what it copied).
    if constexpr (kBulk) {
      wait_parity(full_at, static_cast<uint32_t>(use & 1));
    } else {
      __pipeline_wait_prior(0);
    }
    float v[kPacks][4], edge[1] = {next_edge};
    const int shift = line_shift(pr.r.body_of(x) + p.first, stage_at);
    const int in_line = slot_in_line(pr.r.body_of(x) + p.first);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int s = lined_slot<kPacks, kSplitThreads>(tid, k, in_line);
      if (s < pr.count) {
        const float4 c = stage[shift + s];
        v[k][0] = c.x, v[k][1] = c.y, v[k][2] = c.z, v[k][3] = c.w;
      } else {
        v[k][0] = v[k][1] = v[k][2] = v[k][3] = -INFINITY;
      }
    }
    // Per-thread copies: the next row's slots, into the stage just emptied, at once where the
    // next row starts at the same place in the stage (each thread refills only what it read);
    // where it starts elsewhere, after the block reduction's barrier (when every thread has read).
    bool refill_now = false;
    if constexpr (!kBulk) {
      const PartRow next(lead, row + p.groups, cols, p, chunk);
      refill_now = line_shift(next.r.body_of(x) + p.first, stage_at) == shift;
      if (refill_now) {
        fetch_part<kPacks>(x, lead, row + p.groups, rows, cols, p, chunk, stage_at, next_edge);
        __pipeline_commit();
      }
    }

    // The thread's pair against its own max (a thread with only -inf, or nothing, takes exps
    // against 0 and gets sum 0), the CTA's pair, the row's pair.
    const float thread_max = fmaxf(max_of(v), edge[0]);
    const float base = thread_max == -INFINITY ? 0.f : thread_max;
    float sum = exp_in_place(v, base) + exp_in_place(edge, base);
    float max_val = thread_max;
    block_reduce_pair<kSplitThreads>(max_val, sum, warp_pairs[parity]);
    // Every thread has read the stage (the reduction's barrier): the bulk copy refills it now.
    if constexpr (kBulk) {
      fetch_part_bulk<kPacks>(x, lead, row + p.groups, rows, cols, p, chunk, stage_at, full_at,
                              next_edge);
    } else if (!refill_now) {
      fetch_part<kPacks>(x, lead, row + p.groups, rows, cols, p, chunk, stage_at, next_edge);
      __pipeline_commit();
    }
    float row_max = max_val, row_sum = sum;
    ex.run(p, use, area, row_max, row_sum);

    const float factor = part_factor(thread_max, row_max, row_sum);
    store_part<kPacks, kSplitThreads>(pr.r.body_of(y) + p.first, v, factor, in_line, pr.count);
    if (p.index == 0 && tid < pr.r.head) y[pr.r.start + tid] = edge[0] * factor;
    if (p.index == p.parts - 1 && tid < pr.r.tail)
      y[pr.r.start + pr.r.tail_at + tid] = edge[0] * factor;
  }
}

// `cluster`: a cluster of K CTAs per row (the launch's cluster dimension), persistent over rows.
template <int kPacks>
__global__ void __launch_bounds__(kSplitThreads, 2)
    cluster_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                        int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const Part p = cluster_part(chunk);
  split_rows<kPacks, ClusterExchange, true>(x, y, rows, cols, p, chunk);
  // No CTA leaves while another may still store into its shared memory. (Every pair a CTA
  // receives has landed once it passed its last row's wait; the barrier keeps that rule
  // explicit at the cost of waiting for the cluster's slowest CTA, not for any store.)
  cluster_barrier_relaxed();
#else
  __trap();  // `cluster` is launched only on sm_90 and later (the launcher checks)
#endif
}

// `grid`: groups of `parts` consecutive CTAs of a cooperative grid, persistent over rows;
// Exchange: TaggedExchange where a group takes at most four rows or at most three groups fit,
// else GridExchange (make_split).
template <int kPacks, typename Exchange>
__global__ void __launch_bounds__(kSplitThreads, 2)
    grid_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                     int parts, int chunk, const Exchange ex) {
  const Part p = part_of_block(static_cast<int>(blockIdx.x % parts), parts, chunk);
  split_rows<kPacks, Exchange, false>(x, y, rows, cols, p, chunk, ex);
}

// `grid_held`: few rows that `grid` would not take in one round. As `grid`, a group of K CTAs of
// a cooperative grid a row (the pairs through TaggedExchange), but each CTA's part is twice as
// long: its first kPacks * kThreads slots go into registers (plain loads), the rest (up to as
// many again) into the stage (cp.async), both in flight at once, held until the row is written.
// No next row is in flight: the stage holds this row. Where `grid` would take two rounds
// (8x1048576: groups of 64, the second row's exchange and writes with no loads under them), this
// takes every row in one (groups of 33): 0.74-0.76 of memcpy against 0.72-0.73 (H100). The
// thread's pair is taken pack by pack as the loads land (online_add), so most exponentials run
// under the loads still in flight; the held slots are read twice from shared memory (for the pair,
// and for the store, which takes their exps again). kThreads: 512 (two CTAs an SM), or 1024 (one
// an SM, each part twice as long: rows longer than `grid` holds on the whole GPU).
//   held_rows is the body of `grid_held` (held_rows_kernel: a grid group, tagged words) and of
// `cluster_held` (held_cluster_rows_kernel: a cluster, ClusterExchange).
template <int kPacks, int kThreads, typename Exchange>
__device__ __forceinline__ void held_rows(const float* __restrict__ x, float* __restrict__ y,
                                          int rows, int cols, const Part p, int chunk,
                                          const Exchange ex) {
  extern __shared__ float4 stage[];
  __shared__ float2 warp_pairs[2][kThreads / kWarpSize];
  __shared__ ExchangeArea area;  // the exchange's: the merged pair, or the cluster's K pairs
  constexpr int kInRegisters = kPacks * kThreads;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  const int tid = threadIdx.x;
  const uint32_t stage_at = shared_at(stage);
  ex.init(area);
  int64_t use = 0;
  for (int64_t row = p.group; row < rows; row += p.groups, ++use) {
    const PartRow pr(lead, row, cols, p, chunk);
    const float4* in = pr.r.body_of(x) + p.first;
    const float4* held_in = in + kInRegisters;
    const int held = pr.count - kInRegisters;  // slots in the stage; <= 0 when none
    const int shift = line_shift(held_in, stage_at);
    const int in_line = slot_in_line(in);  // held_in's too: kInRegisters is a multiple of 8
    // A thread's slots in the stage move with the shift: the last row's are all written out.
    if (use > 0) __syncthreads();
    // One commit group per pack of held slots, so that the pass below can take each as it lands.
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int s = lined_slot<kPacks, kThreads>(tid, j, in_line);
      copy16_async(stage_at + (shift + s) * uint32_t(sizeof(float4)), held_in + s, s < held);
      __pipeline_commit();
    }
    float v[kPacks][4], edge[1] = {-INFINITY}, base[kPacks], edge_base;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int s = lined_slot<kPacks, kThreads>(tid, j, in_line);
      load_item(in + s, s < pr.count, v[j]);
    }
    if (p.index == 0 && tid < pr.r.head) edge[0] = x[pr.r.start + tid];
    if (p.index == p.parts - 1 && tid < pr.r.tail) edge[0] = x[pr.r.start + pr.r.tail_at + tid];

    // The thread's pair, taken online a pack at a time in the order the loads were issued, so
    // that the exponentials of the packs that have landed run while the rest are still on their
    // way: the held packs first (their exps are not kept: the store takes them again), then the
    // packs in registers, each left as exps against the thread's max at the time (base[j]).
    float thread_max = -INFINITY, sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      __pipeline_wait_prior(kPacks - 1 - j);  // this thread's copies of pack j have landed
      const int s = lined_slot<kPacks, kThreads>(tid, j, in_line);
      float c[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
      if (s < held) {
        const float4 t = stage[shift + s];
        c[0] = t.x, c[1] = t.y, c[2] = t.z, c[3] = t.w;
      }
      online_add(thread_max, sum, c);
    }
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      online_add(thread_max, sum, v[j]);
      base[j] = thread_max;
    }
    online_add(thread_max, sum, edge);
    edge_base = thread_max;
    // Every register pack onto the thread's final max: one exp a pack.
#pragma unroll
    for (int j = 0; j < kPacks; ++j) scale(v[j], rebase(base[j], thread_max));
    edge[0] *= rebase(edge_base, thread_max);

    float max_val = thread_max;
    block_reduce_pair<kThreads>(max_val, sum, warp_pairs[use & 1]);
    float row_max = max_val, row_sum = sum;
    ex.run(p, use, area, row_max, row_sum);

    const float factor = part_factor(thread_max, row_max, row_sum);
    float4* out = pr.r.body_of(y) + p.first;
    store_part<kPacks, kThreads>(out, v, factor, in_line, pr.count);
    // The held slots: exp(x - row max) / row sum from the values still in the stage. A row of
    // only -inf (max -inf) gives exp(NaN), NaN, as every other path gives it.
    const float inverse = reciprocal(row_sum);
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int s = lined_slot<kPacks, kThreads>(tid, j, in_line);
      if (s < held) {
        const float4 c = stage[shift + s];
        out[kInRegisters + s] =
            make_float4(exp_(c.x - row_max) * inverse, exp_(c.y - row_max) * inverse,
                        exp_(c.z - row_max) * inverse, exp_(c.w - row_max) * inverse);
      }
    }
    if (p.index == 0 && tid < pr.r.head) y[pr.r.start + tid] = edge[0] * factor;
    if (p.index == p.parts - 1 && tid < pr.r.tail)
      y[pr.r.start + pr.r.tail_at + tid] = edge[0] * factor;
  }
}

template <int kPacks, int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    held_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                     int parts, int chunk, const TaggedExchange ex) {
  const Part p = part_of_block(static_cast<int>(blockIdx.x % parts), parts, chunk);
  held_rows<kPacks, kThreads>(x, y, rows, cols, p, chunk, ex);
}

// `cluster_held`: a cluster of K = 2..16 CTAs per row, each holding `grid_held`'s part (kPacks
// float4 a thread in registers and as many again in the stage, loaded at once), the pairs
// exchanged as in `cluster`. No next row in flight within a CTA: the launch has a cluster a row,
// far more than fit at once, so the hardware starts a cluster wherever one ends, and the two CTAs
// of an SM, from different clusters, load and store at different times (not profiled). kThreads:
// 512 (two CTAs an SM), or 1024 (one an SM, each part twice as long: rows of up to 4 MiB).
template <int kPacks, int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    held_cluster_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                             int cols, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const Part p = cluster_part(chunk);
  held_rows<kPacks, kThreads>(x, y, rows, cols, p, chunk, ClusterExchange{});
  // No CTA leaves while another may still store a pair into its shared memory.
  cluster_barrier_relaxed();
#else
  __trap();  // launched only on sm_90 and later (the launcher checks)
#endif
}

}  // namespace fastsoftmax::detail
