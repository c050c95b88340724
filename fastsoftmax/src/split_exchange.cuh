// SPDX-License-Identifier: MIT
// fastsoftmax: how the K CTAs of a split row exchange their (max, sum) pairs: through
// distributed shared memory in a cluster (ClusterExchange), or through global memory in a
// cooperative grid (GridExchange, TaggedExchange). docs/library.md, "Long rows: clusters" and
// "Few rows and very long rows: the grid".
#pragma once

#include "split_parts.cuh"

namespace fastsoftmax::detail {


// What a CTA keeps in shared memory for a cluster's exchange: the K pairs of a row, two sets by row
// parity, and a transaction barrier (mbarrier) per set. `grid` and `grid_held` keep their row's
// merged pair in pairs[parity][0].
struct ExchangeArea {
  float2 pairs[2][kMaxClusterCtas];
  unsigned long long arrived[2];
};

// The exchange of `cluster` and `cluster_held`: every CTA sends its pair to all K CTAs of the
// cluster (itself included) with st.async, a store into another CTA's shared memory that, once it
// lands, counts its 8 bytes off that CTA's barrier; each CTA has told its barrier to expect K*8
// bytes, and waits for them. No cluster-wide barrier a row: cluster.sync() orders all of a
// thread's earlier accesses first (a MEMBAR.GPU that waits for its stores to land), and was the
// kernel's largest stall (docs/library.md, "Long rows: clusters").
//   Two sets by row parity: a CTA sends row i+2's pair into the set that holds row i's pairs only
// after it has received every CTA's row i+1 pair, and each CTA sends that only after all its warps
// have read row i's set (the block reduction before it has a __syncthreads). A pair that arrives
// before its receiver has set up the count for its row drives the count below zero, which is
// allowed: the row's phase cannot complete before the receiver's own arrival.
struct ClusterExchange {
  // The barriers' set-up made visible to the cluster by the fence made for it
  // (fence.mbarrier_init), then a relaxed cluster barrier: no pair is sent to a barrier not yet
  // set up.
  __device__ __forceinline__ static void init(ExchangeArea& area) {
    init_row_barriers(area.arrived);
    cluster_barrier_relaxed();
  }

  // The `use`-th row of this CTA: set use % 2, barrier phase (use / 2) % 2.
  __device__ __forceinline__ static void run(const Part& p, int64_t use, ExchangeArea& area,
                                             float& max_val, float& sum) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int set = static_cast<int>(use & 1);
    const uint32_t phase = static_cast<uint32_t>((use >> 1) & 1);
    const uint32_t barrier = shared_at(&area.arrived[set]);
    const int t = threadIdx.x;
    if (t == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier),
                   "r"(p.parts * int(sizeof(float2)))
                   : "memory");
    if (t < p.parts)  // thread t sends the pair to CTA t, into its slot p.index
      asm volatile(
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
              in_cta(shared_at(&area.pairs[set][p.index]), t)),
          "f"(max_val), "f"(sum), "r"(in_cta(barrier, t))
          : "memory");
    wait_parity(barrier, phase);
    const int lane = t % kWarpSize;
    float2 pair = make_float2(-INFINITY, 0.f);
    if (lane < p.parts) pair = area.pairs[set][lane];
    max_val = pair.x;
    sum = pair.y;
    warp_reduce_pair(max_val, sum);
#else
    __trap();  // clusters are launched only on sm_90 and later (the launcher checks)
#endif
  }
};

// Warp 0's merged pair of the row to every thread of the CTA, through shared memory (by row
// parity, so that a warp racing ahead to the next row writes the other slot).
__device__ __forceinline__ void share_row_pair(ExchangeArea& area, int64_t use, float& max_val,
                                               float& sum) {
  if (threadIdx.x == 0) area.pairs[use & 1][0] = make_float2(max_val, sum);
  __syncthreads();
  const float2 row = area.pairs[use & 1][0];
  max_val = row.x;
  sum = row.y;
}

// The exchange of `grid` over many rows: pairs in global memory, a counting barrier a group.
// Thread 0 publishes the pair and arrives; the last of the K to arrive resets the count and bumps
// the generation, which the others wait for. Then warp 0 alone reads the K pairs from L2, merges
// them and leaves the row's pair in shared memory for the other warps, behind one block barrier.
// Every warp reading the pairs itself put 16-32 warps of each CTA onto the same few L2 lines:
// 1x1048576 (K = 128) ran at 0.56 of memcpy so, against 0.59-0.60, 2x1048579 at 0.81 against
// 0.86 (H100).
// Two sets of pairs by row parity, for the reason ClusterExchange gives; the merged pair in shared
// memory alternates by parity too.
struct GridExchange {
  __device__ __forceinline__ static void init(ExchangeArea&) {}

  __device__ __forceinline__ static void run(const Part& p, int64_t use, ExchangeArea& area,
                                             float& max_val, float& sum) {
    float2* const pairs = g_split_pairs[use & 1];
    if (threadIdx.x < kWarpSize) {
      if (threadIdx.x == 0) {
        cuda::atomic_ref<unsigned, cuda::thread_scope_device> arrived(g_split_arrived[p.group]);
        cuda::atomic_ref<unsigned, cuda::thread_scope_device> generation(
            g_split_generation[p.group]);
        pairs[blockIdx.x] = make_float2(max_val, sum);
        const unsigned gen = generation.load(cuda::memory_order_acquire);
        if (arrived.fetch_add(1, cuda::memory_order_acq_rel) == unsigned(p.parts - 1)) {
          arrived.store(0, cuda::memory_order_relaxed);
          generation.fetch_add(1, cuda::memory_order_release);
        } else {
          while (generation.load(cuda::memory_order_acquire) == gen) __nanosleep(32);
        }
      }
      __syncwarp();  // the warp's reads come after thread 0's acquire
      const int lane = threadIdx.x;
      const int64_t base = blockIdx.x - p.index;  // the group's part 0
      max_val = -INFINITY;
      sum = 0.f;
      for (int k = lane; k < p.parts; k += kWarpSize) {
        const float2 other = __ldcg(pairs + base + k);
        merge(max_val, sum, other.x, other.y);
      }
      warp_reduce_pair(max_val, sum);
    }
    share_row_pair(area, use, max_val, sum);
  }
};

// The exchange of `grid_held`, and of `grid` where a group takes at most four rows or at most
// three groups fit: no counter, no fence, no read-modify-write. Warp 0 of each CTA stores the
// CTA's pair as two 64-bit words, each a tag (the CTA's count of rows so far, + 1) beside one
// float, with one relaxed 16-byte store, then reads the group's K pairs of words until every tag
// is the row's, and merges them. A 64-bit store is single-copy atomic, so a tag seen means its
// float is there. GridExchange's chain (an acq_rel add, the last CTA's reset and release, the
// others' acquire polls) took 0.6-0.8 us more at 8x1048576 and 1x1048576. On groups of many
// rows with the next row in flight, where many groups fit, tagged words lost up to 0.04 of memcpy
// (256x524288: 0.85 against 0.89), so those keep GridExchange (docs/library.md, "Few rows and
// very long rows: the grid").
//   Words by row parity: a CTA overwrites its word of row i with row i + 2's only after it has
// seen all K words of row i + 1, which every CTA stores only after it has read row i's. Two sets
// by launch parity: each launch clears the other set, which the next tagged launch (grid launches
// are serialised and counted in split_launch.cu) finds at zero, a tag no row has.
// 16-byte aligned: each CTA's two words are one 16-byte access.
__device__ __align__(16) unsigned long long g_tagged_words[2][2][kMaxGridCtas][2];


struct TaggedExchange {
  unsigned parity;  // the launch's: which set of words it uses

  __device__ __forceinline__ void init(ExchangeArea&) const {
    unsigned long long* other = &g_tagged_words[parity ^ 1][0][0][0];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 2 * kMaxGridCtas * 2;
         i += gridDim.x * blockDim.x)
      other[i] = 0;
  }

  __device__ __forceinline__ void run(const Part& p, int64_t use, ExchangeArea& area,
                                      float& max_val, float& sum) const {
    unsigned long long(*const words)[2] = g_tagged_words[parity][use & 1];
    const unsigned long long tag = static_cast<unsigned long long>(use + 1) << 32;
    if (threadIdx.x < kWarpSize) {
      const int lane = threadIdx.x;
      if (lane == 0)
        asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(words[blockIdx.x]),
                     "l"(tag | __float_as_uint(max_val)), "l"(tag | __float_as_uint(sum))
                     : "memory");
      const int64_t base = blockIdx.x - p.index;  // the group's part 0
      constexpr int kBatch = kTaggedBatch;         // loads a lane issues before using any
      for (;;) {
        max_val = -INFINITY;
        sum = 0.f;
        bool ready = true;
        for (int k0 = 0; k0 < p.parts; k0 += kBatch * kWarpSize) {
          ulonglong2 w[kBatch];
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            const int k = min(k0 + lane + j * kWarpSize, p.parts - 1);
            asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                         : "=l"(w[j].x), "=l"(w[j].y)
                         : "l"(words[base + k])
                         : "memory");
          }
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (k0 + lane + j * kWarpSize >= p.parts) continue;
            ready &= (w[j].x >> 32) == (tag >> 32) && (w[j].y >> 32) == (tag >> 32);
            merge(max_val, sum, __uint_as_float(unsigned(w[j].x)),
                  __uint_as_float(unsigned(w[j].y)));
          }
        }
        if (__all_sync(0xffffffffu, ready)) break;
        __nanosleep(32);
      }
      warp_reduce_pair(max_val, sum);
    }
    share_row_pair(area, use, max_val, sum);
  }
};


}  // namespace fastsoftmax::detail
