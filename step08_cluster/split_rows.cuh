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
//       stores its pair into every CTA's shared memory (distributed shared memory, st.async) and
//       each waits on its own transaction barrier (mbarrier) until all K pairs have landed.
//   (h) a group of K CTAs of a cooperative grid (any K): pairs in global memory. Where a group
//       takes at most four rows, or at most three groups fit, each pair is stored as two tagged
//       words that the K CTAs read until every tag is the row's (TaggedExchange); else behind a
//       counter in global memory that the last CTA to arrive resets (GridExchange). Cooperative
//       launch guarantees every CTA is resident, so a CTA spinning on the words or the counter
//       cannot keep the one it waits for from running.
//
// Both loop over rows: a cluster or group takes rows g, g + groups, ... (g) on many rows is
// launched with a cluster per two rows, far more than fit at once (split.cu). While it reduces and
// writes one row, the next row's part is already on its way into a shared-memory stage, from
// which each thread moves its slots into registers when the row comes up. The DRAM reads of row
// i+1 overlap the reductions, the exchange and the writes of row i. (g) fills the stage with one
// bulk copy per row (cp.async.bulk, the copy engine; an mbarrier counts its bytes in): 0.95 of
// memcpy at 2048x65536 where per-thread copies ran at 0.91 (docs/notes/step08.md, change 4).
// (h) keeps the per-thread copies (cp.async, 16 bytes each, bypassing registers): with the bulk
// copy it measured slower (0.78 against 0.91 at 512x262144; why is open).
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

// A 16-byte asynchronous copy from global memory to shared memory (cp.async.cg: through L2 only),
// to a shared-memory address (the 32-bit kind __cvta_generic_to_shared gives), issued only where
// `in_row`: a predicate, not a branch. Written out because __pipeline_memcpy_async behind an `if`
// made each copy a branch of its own, in which the compiler recomputed both full addresses: about
// 30 instructions a copy where this takes one or two (docs/notes/step08.md, change 1).
__device__ __forceinline__ void copy16_async(uint32_t to, const float4* from, bool in_row) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
      " @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(to),
      "l"(from), "r"(int(in_row))
      : "memory");
}

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

// The same part staged by the bulk-copy engine (path g): thread 0 tells the stage's barrier to
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
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full), "r"(bytes)
                 : "memory");
    if (bytes != 0)
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
          ::"r"(to), "l"(first), "r"(bytes), "r"(full)
          : "memory");
  }
#endif
  if (p.index == 0 && t < pr.r.head) edge = x[pr.r.start + t];
  if (p.index == p.parts - 1 && t < pr.r.tail) edge = x[pr.r.start + pr.r.tail_at + t];
}

// Spins until the mbarrier at `barrier` has completed the phase of parity `phase`.
__device__ __forceinline__ void wait_parity(uint32_t barrier, uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(phase)
        : "memory");
  } while (!done);
#endif
}

// What a CTA keeps in shared memory for the exchange of (g): the K pairs of a row, two sets by row
// parity, and a transaction barrier (mbarrier) per set. (h) and (i) keep their row's merged pair
// in pairs[parity][0].
struct ExchangeArea {
  float2 pairs[2][kMaxClusterCtas];
  unsigned long long arrived[2];
};

// The 32-bit shared-memory address of p in this CTA's window, and the same place in CTA `rank`'s.
__device__ __forceinline__ uint32_t shared_at(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t in_cta(uint32_t at, int rank) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(rank));
  return remote;
}

// The exchange of (g): every CTA sends its pair to all K CTAs of the cluster (itself included)
// with st.async, a store into another CTA's shared memory that, once it lands, counts its 8 bytes
// off that CTA's barrier; each CTA has told its barrier to expect K*8 bytes, and waits for them.
// No cluster-wide barrier per row: cluster.sync() orders all of a thread's earlier memory
// accesses first (a MEMBAR.GPU that waits for the thread's stores to land), and with it the
// membar was the largest stall of this kernel (docs/notes/step08.md, change 1).
//   Two sets by row parity: a CTA sends row i+2's pair into the set that holds row i's pairs only
// after it has received every CTA's row i+1 pair, and each CTA sends that only after all its warps
// have read row i's set (the block reduction before it has a __syncthreads). A pair that arrives
// before its receiver has set up the count for its row drives the count below zero, which is
// allowed: the row's phase cannot complete before the receiver's own arrival.
// A cluster-wide barrier without memory ordering. cluster.sync() arrives with release semantics:
// each thread first waits until its earlier stores (and copies) have landed, a MEMBAR stall of
// about 1.5 us per launch at the kernel's start and end, where nothing needs that ordering
// (docs/notes/step08.md, change 3). Its two halves are also used apart, by a CTA with work to do
// between arriving and waiting (the small clusters, change 24).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_barrier_relaxed() {
  cluster_arrive_relaxed();
  cluster_wait();
}

// Thread 0 sets up a CTA's two transaction barriers (one arrival each, by row parity) and makes
// the set-up visible to the cluster (fence.mbarrier_init); a cluster barrier must follow before
// any other CTA counts bytes on them.
__device__ __forceinline__ void init_row_barriers(unsigned long long (&arrived)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_at(&arrived[i]))
                   : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
#endif
}

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
    __trap();  // (g) is launched only on sm_90 and later (the launcher checks)
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

// The exchange of (h): pairs in global memory, a counting barrier per group. Thread 0 publishes
// the pair and arrives; the last of the K to arrive resets the count and bumps the generation,
// which the others wait for. Then warp 0 reads the K pairs from L2, merges them and leaves the
// row's pair in shared memory for the other warps, behind one block barrier. Every warp reading
// the K pairs itself, as first written, put 16-32 warps of each of the K CTAs onto the same few L2
// lines at once: 1x1048576 (K = 128) ran at 0.56 of memcpy against 0.59-0.60, 2x1048579 at 0.81
// against 0.86, 128x1048579 (K = 64) at 0.81 against 0.84 (docs/notes/step08.md, change 10).
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

// The exchange of (i), and of (h) where a group takes at most four rows or at most three groups
// fit: no counter, no fence, no read-modify-write. Warp 0 of each CTA stores the CTA's pair as two
// 64-bit words, each a tag (the CTA's count of rows so far, + 1) beside one float, with one
// relaxed 16-byte store, then reads the group's K pairs of words until every tag is the row's,
// and merges them. A 64-bit store is single-copy atomic, so a tag seen means its float is there.
// GridExchange's chain (the pair stored, an acq_rel add, the last CTA's reset and release, the
// others' acquire polls, then the pairs read) took 0.6-0.8 us more at 8x1048576 and 1x1048576,
// where this one runs at 0.82-0.83 and 0.65-0.66 of memcpy against 0.80 and 0.61
// (docs/notes/step08.md, change 21). On groups that
// take many rows, with the next row's copies in flight, it lost up to 0.04 where eight groups fit
// (256x524288 0.85 against 0.89), so those keep GridExchange; where at most three fit it was
// ahead or level over any number of rows at the fewest CTAs that hold a row (change 42; in groups
// widened to every resident CTA it lost to the counter).
//   Words by row parity: a CTA overwrites its word of row i with row i + 2's only after it has
// seen all K words of row i + 1, which every CTA stores only after it has read row i's. Two sets
// by launch parity: each launch clears the other set, which the next tagged launch (launches of (h)
// and (i) are serialised, split.cu, and counted there) finds at zero, a tag no row has.
// 16-byte aligned: each CTA's two words are one 16-byte access.
__device__ __align__(16) unsigned long long g_tagged_words[2][2][kMaxGridCtas][2];

// The tagged pairs (16-byte loads) a lane issues before it uses any: a group of up to
// kTaggedBatchParts CTAs reads its pairs in one batch, a larger one in two or more (change 47).
constexpr int kTaggedBatch = 4;
constexpr int kTaggedBatchParts = kTaggedBatch * kWarpSize;

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

// One row per cluster or group per round, the next row's part in flight (see the top).
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

// (g): a cluster of K CTAs per row (the launch's cluster dimension), persistent over rows.
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
  __trap();  // (g) is launched only on sm_90 and later (the launcher checks)
#endif
}

// (g) in CTAs of 128 threads, for rows of 2048-16384 slots (8K-64K floats) that fit in one round:
// a cluster of K = 2..16 CTAs per row, each part straight into registers (plain loads, no stage),
// then each warp's pair, the exchange of the warps' pairs and the store. One row per cluster,
// every cluster launched at once (the loop makes any grid correct). On a small matrix the launch
// is a chain of latencies (docs/notes/step08.md, change 18): path (c), one block of 256 a row,
// leaves most SMs idle, and (g)'s CTAs of 512 lost 0.08-0.11 of memcpy to those of 128 (32x16384
// 0.65-0.66 in clusters of 4 of 512, 0.74-0.80 in clusters of 8 of 128, path c 0.70-0.73).
// The rows start in stages of about 1 MiB of the matrix (split.cu), so that the first rows are
// exchanged and stored while the rest still stream in (change 24's two stages: 32x16384
// 0.83-0.88 against 0.81-0.86 without, 64x16384 0.86-0.90 against 0.84-0.87; change 27's
// stages of 1 MiB). Clusters of 9-16 CTAs (rows past 8192 slots) exchange two pairs a lane
// (change 28).
constexpr int kSmallSplitThreads = 128;
constexpr int kSmallSplitWarps = kSmallSplitThreads / kWarpSize;
// One pair a lane up to K = 8 (K * 4 <= 32); two a lane (kWide) for K = 9..16 (change 28).
constexpr int kSmallNarrowParts = kWarpSize / kSmallSplitWarps;
constexpr int kSmallMaxParts = 2 * kSmallNarrowParts;

// The exchange of the small clusters: no block reduction. Every warp takes its own pair (its max
// by warp_max, exps against it, the sum by a butterfly) and sends it with st.async to all K CTAs
// of the cluster, into slot (CTA rank * 4 + warp) of the row's set; each CTA's barrier expects K*4
// pairs. After the wait, lane l of every warp reads pair l: the row's max by warp_max, one exp
// (rescale) and a butterfly for the sum. A CTA's pair in the exchange of (g) came out of a block
// reduction (a butterfly of pair merges, shared memory, a __syncthreads, a second butterfly)
// before it could be sent: 32x16384 ran at 0.76-0.77 of memcpy with it, 0.83-0.85 without it, in
// the same rounds (change 24). Taking the row's max by pair merges instead of warp_max measured
// the same (0.82-0.84): the block reduction was the cost.
//   Two sets by row parity, as in ClusterExchange: a warp sends row i+2's pair into the set that
// holds row i's only after its CTA has received all K*4 pairs of row i+1, and every warp sends its
// row i+1 pair only after it has read row i's set, so every reader of row i's set is done.
//   kWide (clusters of 9-16 CTAs, 36-64 pairs a row): lane l reads pairs l and l + 32 and merges
// the two before the same warp_max and butterfly (change 28).
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
// after it starts, so the rows come in stages (stagger_ns 0: none; split.cu says how many and how
// far apart). 32-bit arithmetic: a 64-bit division here, ahead of every CTA's loads, measured
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

// (h): groups of `parts` consecutive CTAs of a cooperative grid, persistent over rows; Exchange:
// TaggedExchange where a group takes at most four rows or at most three groups fit, else
// GridExchange (split.cu).
template <int kPacks, typename Exchange>
__global__ void __launch_bounds__(kSplitThreads, 2)
    grid_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                     int parts, int chunk, const Exchange ex) {
  const Part p = part_of_block(static_cast<int>(blockIdx.x % parts), parts, chunk);
  split_rows<kPacks, Exchange, false>(x, y, rows, cols, p, chunk, ex);
}

// (i): few rows too long for (h) to hold in one round. As (h), a group of K CTAs of a cooperative
// grid per row (the pairs through TaggedExchange), but each CTA's part is twice as long: its first kPacks * 512 slots go into
// registers (plain loads), the rest (up to as many again) into the shared-memory stage (cp.async),
// both in flight at once, and stay there until the row is written. No next row is in flight: the
// stage holds this row. Where (h) would need two or more rounds of rows (8x1048576: groups of 64,
// two rows each, the second row's exchange and writes with no loads under them), (i) takes every
// row in one round (groups of 33). The thread's pair is taken online, pack by pack, as the loads
// land (reduce.cuh's online_add), so most exponentials run under the loads still in flight; the
// held slots are read twice from shared memory (the pair; the store, which takes their exps
// again against the row's max). kThreads: 512 (two CTAs an SM), or 1024 (one an SM, each part
// twice as long: rows longer than (h) holds on the whole GPU, split.cu). Change 11 in
// docs/notes/step08.md has the measurements.
//   The body is held_rows, for (i) (held_rows_kernel: a group of a cooperative grid, tagged words)
// and for (g) with held parts (held_cluster_rows_kernel: a cluster, ClusterExchange; change 44).
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

// (g) with held parts: a cluster of K = 2..16 CTAs per row, each holding (i)'s part (kPacks float4
// a thread in registers and as many again in the stage, both loaded at once), the pairs exchanged
// as in (g) (ClusterExchange). No next row is in flight within a CTA: the stage holds this row.
// The launch has a cluster per row, far more than fit at once, so the hardware starts a cluster
// wherever one ends, and the two CTAs of an SM, from different clusters, may load and store at
// different times (change 44 in docs/notes/step08.md; not profiled). kThreads: 512 (two CTAs an
// SM), or 1024 (one an SM, each part twice as long: rows of up to 4 MiB).
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

}  // namespace step08_cluster
