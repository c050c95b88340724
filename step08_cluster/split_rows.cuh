// SPDX-License-Identifier: MIT
// step08_cluster, paths (g) and (h): one row split over several CTAs, each on its own SM.
//
// A row of N floats is cut into K parts, one per CTA. CTA k holds body slots [k*chunk,
// (k+1)*chunk) of the row in registers (512 threads, kPacks float4 each); part 0 also holds the
// head and part K-1 the tail (row_split.cuh). Every element is read once and written once:
//
//   row:    | h | part 0 slots     | part 1 slots     | ... | part K-1 slots | t |
//             CTA 0               CTA 1                     CTA K-1
//   each CTA: its (max, sum) pair -> exchange the K pairs -> the row's (max, sum) -> scale, store
//
// The K CTAs of a row agree on the row's max and sum with one exchange of (max, sum) pairs: each
// CTA reduces its part to a pair against its own max, publishes it, and after a barrier reads all
// K pairs and merges them (reduce.cuh's merge: the online-softmax rescaling). One barrier across
// SMs per row. Where the pairs live is the difference between the two paths:
//
//   (g) a thread block cluster (sm_90): the K = 2..16 CTAs are co-scheduled on one GPC; each
//       publishes its pair in its own shared memory, cluster.sync() is the barrier, and the others
//       read it through distributed shared memory (cluster.map_shared_rank).
//   (h) a group of K CTAs of a cooperative grid (any K): pairs in global memory, the barrier a
//       counter in global memory that the last CTA to arrive resets. Cooperative launch
//       guarantees every CTA is resident, so a CTA spinning on the counter cannot keep the one it
//       waits for from running.
//
// Both are persistent: a cluster or group takes rows g, g + groups, ... While it reduces and
// writes one row, the next row's part is already on its way: each thread copies its slots of the
// next row into shared memory by cp.async (16-byte asynchronous copies that bypass registers),
// and moves them into registers when the row comes up. The DRAM reads of row i+1 overlap the
// reductions, the exchange and the writes of row i.
#pragma once

#include <cooperative_groups.h>
#include <cuda/atomic>
#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "reduce.cuh"
#include "row_split.cuh"

namespace step08_cluster {

constexpr int kSplitThreads = 512;
constexpr int kSplitWarps = kSplitThreads / kWarpSize;
constexpr int kMaxClusterCtas = 16;  // 9-16 need cudaFuncAttributeNonPortableClusterSizeAllowed
constexpr int kMaxGridCtas = 4096;   // the most CTAs path (h)'s exchange area has room for

// Path (h)'s exchange area: a pair per CTA (two sets, by row parity) and a counter and a
// generation per group. Zero at load; every barrier leaves its counter at zero again.
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

// The part of row `row` this CTA holds: its slots (count <= chunk, may be 0) and edges.
struct PartRow {
  RowSplit<4> r;
  int count;
  __device__ __forceinline__ PartRow(int lead, int64_t row, int cols, const Part& p, int chunk)
      : r(lead, row, cols) {
    count = max(0, min(chunk, r.body - p.first));
  }
};

// Issues this thread's copies of its slots of a row into `stage` (slot t + k*512 at the same
// index), and loads its head or tail element (threads 0-2 of the first and last part).
template <int kPacks>
__device__ __forceinline__ void fetch_part(const float* x, int lead, int64_t row, int rows,
                                           int cols, const Part& p, int chunk, float4* stage,
                                           float& edge) {
  edge = -INFINITY;
  if (row >= rows) return;
  const PartRow pr(lead, row, cols, p, chunk);
  const float4* in = pr.r.body_of(x) + p.first;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int s = threadIdx.x + k * kSplitThreads;
    if (s < pr.count) __pipeline_memcpy_async(stage + s, in + s, sizeof(float4));
  }
  const int t = threadIdx.x;
  if (p.index == 0 && t < pr.r.head) edge = x[pr.r.start + t];
  if (p.index == p.parts - 1 && t < pr.r.tail) edge = x[pr.r.start + pr.r.tail_at + t];
}

// The exchange of (g): every CTA's pair in its own shared memory (`slots`, two by row parity),
// one cluster barrier, then every warp reads the K pairs through DSMEM and merges them. Two slots:
// a CTA that has passed this row's barrier may write the next row's pair while a slower CTA still
// reads this row's; it cannot get two rows ahead, since that needs the slower CTA at the next
// row's barrier.
struct ClusterExchange {
  __device__ __forceinline__ static void run(const Part& p, int parity, float2* slots,
                                             float& max_val, float& sum) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float2* slot = slots + parity;
    if (threadIdx.x == 0) *slot = make_float2(max_val, sum);
    cluster.sync();
    const int lane = threadIdx.x % kWarpSize;
    float2 pair = make_float2(-INFINITY, 0.f);
    if (lane < p.parts) pair = *cluster.map_shared_rank(slot, lane);
    max_val = pair.x;
    sum = pair.y;
    warp_reduce_pair(max_val, sum);
#else
    __trap();  // (g) is launched only on sm_90 and later (the launcher checks)
#endif
  }
};

// The exchange of (h): pairs in global memory, a counting barrier per group. Thread 0 publishes
// the pair and arrives; the last of the K to arrive resets the count and bumps the generation,
// which the others wait for. Then every warp reads the K pairs from L2 and merges them. Two sets
// of pairs by row parity, for the reason ClusterExchange gives.
struct GridExchange {
  __device__ __forceinline__ static void run(const Part& p, int parity, float2*, float& max_val,
                                             float& sum) {
    float2* const pairs = g_split_pairs[parity];
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
    __syncthreads();
    const int lane = threadIdx.x % kWarpSize;
    const int64_t base = blockIdx.x - p.index;  // the group's part 0
    max_val = -INFINITY;
    sum = 0.f;
    for (int k = lane; k < p.parts; k += kWarpSize) {
      const float2 other = __ldcg(pairs + base + k);
      merge(max_val, sum, other.x, other.y);
    }
    warp_reduce_pair(max_val, sum);
  }
};

// One row per cluster or group per round, the next row's part in flight (see the top).
// kPacks: float4 slots per thread (chunk <= kPacks * 512). Dynamic shared memory: kPacks * 512
// float4, the stage.
template <int kPacks, typename Exchange>
__device__ __forceinline__ void split_rows(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols, const Part p, int chunk) {
  extern __shared__ float4 stage[];
  __shared__ float2 warp_pairs[2][kSplitWarps];
  __shared__ float2 cta_pair[2];
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  const int tid = threadIdx.x;
  float next_edge;
  fetch_part<kPacks>(x, lead, p.group, rows, cols, p, chunk, stage, next_edge);
  __pipeline_commit();
  int parity = 0;
  for (int64_t row = p.group; row < rows; row += p.groups, parity ^= 1) {
    const PartRow pr(lead, row, cols, p, chunk);
    // This row's slots: from the stage into registers (each thread reads only what it copied).
    __pipeline_wait_prior(0);
    float v[kPacks][4], edge[1] = {next_edge};
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int s = tid + k * kSplitThreads;
      if (s < pr.count) {
        const float4 c = stage[s];
        v[k][0] = c.x, v[k][1] = c.y, v[k][2] = c.z, v[k][3] = c.w;
      } else {
        v[k][0] = v[k][1] = v[k][2] = v[k][3] = -INFINITY;
      }
    }
    // The next row's slots, into the stage just emptied.
    fetch_part<kPacks>(x, lead, row + p.groups, rows, cols, p, chunk, stage, next_edge);
    __pipeline_commit();

    // The thread's pair against its own max (a thread with only -inf, or nothing, takes exps
    // against 0 and gets sum 0), the CTA's pair, the row's pair.
    const float thread_max = fmaxf(max_of(v), edge[0]);
    const float base = thread_max == -INFINITY ? 0.f : thread_max;
    float sum = exp_in_place(v, base) + exp_in_place(edge, base);
    float max_val = thread_max;
    block_reduce_pair<kSplitThreads>(max_val, sum, warp_pairs[parity]);
    float row_max = max_val, row_sum = sum;
    Exchange::run(p, parity, cta_pair, row_max, row_sum);

    // y = exp(x - base) * exp(base - row_max) / row_sum. A thread that saw no finite value holds
    // only zeros: its factor is 0 / row_sum, which is 0, or NaN where the row's sum is NaN (a NaN
    // or +inf anywhere in the row) as every other path gives it. A row of only -inf has sum 0:
    // 0 / 0, NaN, again as elsewhere.
    const float factor =
        (thread_max == -INFINITY ? 0.f : rescale(thread_max, row_max)) / row_sum;
    float4* out = pr.r.body_of(y) + p.first;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int s = tid + k * kSplitThreads;
      if (s < pr.count)
        out[s] = make_float4(v[k][0] * factor, v[k][1] * factor, v[k][2] * factor,
                             v[k][3] * factor);
    }
    if (p.index == 0 && tid < pr.r.head) y[pr.r.start + tid] = edge[0] * factor;
    if (p.index == p.parts - 1 && tid < pr.r.tail)
      y[pr.r.start + pr.r.tail_at + tid] = edge[0] * factor;
  }
}

// (g): a cluster of K CTAs per row (the launch's cluster dimension), persistent over rows.
template <int kPacks>
__global__ void __launch_bounds__(kSplitThreads, 2)
    cluster_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                        int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int k = static_cast<int>(cluster.block_rank());
  const int parts = static_cast<int>(cluster.num_blocks());
  const Part p{k, parts, blockIdx.x / parts, gridDim.x / parts, k * chunk};
  split_rows<kPacks, ClusterExchange>(x, y, rows, cols, p, chunk);
  cluster.sync();  // no CTA leaves while another may still read its pair
#else
  __trap();  // (g) is launched only on sm_90 and later (the launcher checks)
#endif
}

// (h): groups of `parts` consecutive CTAs of a cooperative grid, persistent over rows.
template <int kPacks>
__global__ void __launch_bounds__(kSplitThreads, 2)
    grid_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                     int parts, int chunk) {
  const int k = blockIdx.x % parts;
  const Part p{k, parts, blockIdx.x / parts, gridDim.x / parts, k * chunk};
  split_rows<kPacks, GridExchange>(x, y, rows, cols, p, chunk);
}

}  // namespace step08_cluster
