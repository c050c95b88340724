// SPDX-License-Identifier: MIT
// fastsoftmax: clusters of CTAs of 128 threads, each part straight into registers, for rows of
// 8K-64K floats that fit in one round (docs/library.md, "Long rows: clusters").
#pragma once

#include "split_exchange.cuh"

namespace fastsoftmax::detail {

// The small clusters: `cluster` in CTAs of 128 threads, for rows of 2048-16384 slots (8K-64K
// floats) that fit in one round: a cluster of K = 2..16 CTAs a row, each part straight into
// registers (plain loads, no stage), then each warp's pair, their exchange and the store. One row
// a cluster, every cluster launched at once (the loop makes any grid correct). On a small matrix
// a launch is a chain of latencies: `block` leaves most SMs idle, and CTAs of 512 lost 0.08-0.11
// of memcpy to those of 128 (32x16384: 0.65-0.66 in clusters of 4 of 512, 0.74-0.80 in clusters
// of 8 of 128, `block` 0.70-0.73; H100). The rows start in stages of about 1 MiB of the matrix
// (make_split), so that the first rows are exchanged and stored while the rest stream in.
// Clusters of 9-16 CTAs (rows past 8192 slots) exchange two pairs a lane.

// The exchange of the small clusters: no block reduction. Every warp takes its own pair (its max
// by warp_max, exps against it, the sum by a butterfly) and sends it with st.async to all K CTAs
// of the cluster, into slot (CTA rank * 4 + warp) of the row's set; each CTA's barrier expects K*4
// pairs. After the wait, lane l of every warp reads pair l: the row's max by warp_max, one exp
// (rescale) and a butterfly for the sum. A block-reduced pair, as ClusterExchange sends, cost
// 32x16384 0.76-0.77 of memcpy against 0.83-0.85 in the same rounds; the row's max by pair merges
// instead of warp_max measured the same: the block reduction was the cost (docs/library.md, "Long
// rows: clusters").
//   Two sets by row parity, as in ClusterExchange: a warp sends row i+2's pair into the set that
// holds row i's only after its CTA has received all K*4 pairs of row i+1, and every warp sends its
// row i+1 pair only after it has read row i's set, so every reader of row i's set is done.
//   kWide (clusters of 9-16 CTAs, 36-64 pairs a row): lane l reads pairs l and l + 32 and merges
// the two before the same warp_max and butterfly.
template <bool kWide = false>
struct WarpExchange {
  static constexpr int kSlots = kWide ? 2 * kWarpSize : kWarpSize;
  struct Area {
    float2 pairs[2][kSlots];
    unsigned long long arrived[2];
  };

  // `max_val` and `sum`: the warp's pair (every lane holds it); they come back as the row's.
  __device__ __forceinline__ static void run(const Part& p, int64_t use, Area& area,
                                             float& max_val, float& sum) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int set = static_cast<int>(use & 1);
    const uint32_t phase = static_cast<uint32_t>((use >> 1) & 1);
    const uint32_t barrier = shared_at(&area.arrived[set]);
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int pairs = p.parts * kSmallSplitWarps;
    if (threadIdx.x == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier),
                   "r"(pairs * int(sizeof(float2)))
                   : "memory");
    if (lane < p.parts)  // lane k sends the warp's pair to CTA k
      asm volatile(
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
              in_cta(shared_at(&area.pairs[set][p.index * kSmallSplitWarps + warp]), lane)),
          "f"(max_val), "f"(sum), "r"(in_cta(barrier, lane))
          : "memory");
    wait_parity(barrier, phase);
    const float2 pair = lane < pairs ? area.pairs[set][lane] : make_float2(-INFINITY, 0.f);
    if constexpr (kWide) {
      const float2 more =
          lane + kWarpSize < pairs ? area.pairs[set][lane + kWarpSize] : make_float2(-INFINITY, 0.f);
      max_val = warp_max(fmaxf(pair.x, more.x));
      sum = group_all_reduce<kWarpSize, false>(pair.y * rescale(pair.x, max_val) +
                                               more.y * rescale(more.x, max_val));
    } else {
      max_val = warp_max(pair.x);
      sum = group_all_reduce<kWarpSize, false>(pair.y * rescale(pair.x, max_val));
    }
#else
    __trap();  // launched only on sm_90 and later (the launcher checks)
#endif
  }
};

// Spins until `ns` nanoseconds have passed on the GPU's global timer (it ticks every 32 ns on an
// H100), from when it is called.
__device__ __forceinline__ void spin_for(unsigned ns) {
  unsigned long long now, until;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  until = now + ns;
  while (now < until) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}

// Stagger: cluster g starts its first row's loads (g / stage_groups) * stagger_ns nanoseconds
// after it starts, so the rows come in stages (stagger_ns 0: none; make_split says how many and
// how far apart). 32-bit arithmetic: a 64-bit division here, ahead of every CTA's loads, measured
// about 0.2 us slower at 32x16384.
// kAligned: every row starts on a 16-byte boundary (x aligned, N % 4 == 0): no head, no tail.
// kExact: aligned, and every part is exactly kPacks * 128 slots (N = K * kPacks * 512): thread t
// takes slots t + j * 128, with no bounds to check, through the read-only data path (ld.global.nc).
// kWide: clusters of 9-16 CTAs (WarpExchange<true>).
template <int kPacks, bool kAligned, bool kExact, bool kWide = false>
__global__ void __launch_bounds__(kSmallSplitThreads)
    small_cluster_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                              int cols, int chunk, int stage_groups, unsigned stagger_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Exchange = WarpExchange<kWide>;
  __shared__ typename Exchange::Area area;
  const Part p = cluster_part(chunk);
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  const int tid = threadIdx.x;
  // The barriers' set-up made visible to the cluster (fence.mbarrier_init), then the first half of
  // a relaxed cluster barrier; its wait comes after the first row's loads are issued.
  init_row_barriers(area.arrived);
  cluster_arrive_relaxed();
  if (stagger_ns != 0) {
    const unsigned stage = static_cast<unsigned>(p.group) / static_cast<unsigned>(stage_groups);
    if (stage != 0) spin_for(stage * stagger_ns);
  }
  int64_t use = 0;  // rows this CTA has taken
  for (int64_t row = p.group; row < rows; row += p.groups, ++use) {
    const PartRowOf<kAligned> pr(lead, row, cols, p, chunk);
    const float4* in = pr.r.body_of(x) + p.first;
    const int in_line = slot_in_line(in);
    float v[kPacks][4], edge[1] = {-INFINITY};
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      if constexpr (kExact) {
        const float4 c = __ldg(in + tid + j * kSmallSplitThreads);
        v[j][0] = c.x, v[j][1] = c.y, v[j][2] = c.z, v[j][3] = c.w;
      } else {
        const int s = lined_slot<kPacks, kSmallSplitThreads>(tid, j, in_line);
        load_item(in + s, s < pr.count, v[j]);
      }
    }
    if constexpr (!kAligned) {
      if (p.index == 0 && tid < pr.r.head) edge[0] = x[pr.r.start + tid];
      if (p.index == p.parts - 1 && tid < pr.r.tail) edge[0] = x[pr.r.start + pr.r.tail_at + tid];
    }

    // The warp's pair: its max, exps against it (against 0 where the warp saw only -inf), its sum.
    const float warp_top = warp_max(kAligned ? max_of(v) : fmaxf(max_of(v), edge[0]));
    const float base = warp_top == -INFINITY ? 0.f : warp_top;
    float row_sum = exp_in_place(v, base);
    if constexpr (!kAligned) row_sum += exp_in_place(edge, base);
    row_sum = group_all_reduce<kWarpSize, false>(row_sum);
    float row_max = warp_top;
    // No pair is sent before every CTA of the cluster has set up its barriers.
    if (use == 0) cluster_wait();
    Exchange::run(p, use, area, row_max, row_sum);
    // The last row's pairs have all landed here: the exit barrier's arrival, before the stores.
    if (row + p.groups >= rows) cluster_arrive_relaxed();

    const float factor = part_factor(warp_top, row_max, row_sum);
    if constexpr (kExact) {
      float4* out = pr.r.body_of(y) + p.first;
#pragma unroll
      for (int j = 0; j < kPacks; ++j)
        out[tid + j * kSmallSplitThreads] = make_float4(v[j][0] * factor, v[j][1] * factor,
                                                        v[j][2] * factor, v[j][3] * factor);
    } else {
      store_part<kPacks, kSmallSplitThreads>(pr.r.body_of(y) + p.first, v, factor, in_line,
                                             pr.count);
    }
    if constexpr (!kAligned) {
      if (p.index == 0 && tid < pr.r.head) y[pr.r.start + tid] = edge[0] * factor;
      if (p.index == p.parts - 1 && tid < pr.r.tail)
        y[pr.r.start + pr.r.tail_at + tid] = edge[0] * factor;
    }
  }
  // A cluster with no row (more clusters than rows) passes the same barriers: the set-up's wait
  // and the exit's arrival. No CTA leaves while another may still store into its shared memory.
  if (use == 0) {
    cluster_wait();
    cluster_arrive_relaxed();
  }
  cluster_wait();
#else
  __trap();  // launched only on sm_90 and later (the launcher checks)
#endif
}


}  // namespace fastsoftmax::detail
