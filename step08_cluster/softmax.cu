// SPDX-License-Identifier: MIT
// step08_cluster: a long row split over a thread block cluster, its (max, sum) exchanged through
// distributed shared memory.
//
// What changed: step07 gives a row at most one block, so one SM, and reads a row longer than one
//   block's registers hold twice. Here a row of 2 to 16 CTAs' worth is split over a cluster of K
//   CTAs, which the hardware places at once on K SMs of one GPC. Each CTA holds its part in
//   registers, reduces it to one (max, sum) pair and stores the pair into the shared memory of all
//   K CTAs (st.async, distributed shared memory); an mbarrier in each CTA counts the K pairs in,
//   and every CTA merges them into the row's max and sum, then scales and stores its part. Each
//   element is read once and written once. The clusters are persistent, as many as fit at once,
//   each looping over rows; while a row is reduced, exchanged and stored, the CTA's part of its
//   next row streams into a shared-memory stage, one bulk copy a part. Other rows take step07's
//   launcher.
//
//   row (N floats):  | h | part 0: CTA 0 | part 1: CTA 1 | ... | part K-1: CTA K-1 | t |
//   h, t: the 0-3 floats before the row's first 16-byte boundary and after its last whole float4
//         (CTA 0 holds the head, CTA K-1 the tail); the parts split the float4 body between them.
//
// Dispatch, by B = N / 4 rounded down (a row's body has B or B - 1 float4, whatever its start):
//   B <= 4096, N <= 16387               one CTA's worth, no exchange needed: step07's launcher
//   4096 < B <= 65536, N <= 262147      a cluster of K = ceil(B / 4096) CTAs a row, 2 <= K <= 16
//   longer rows; a GPU without clusters; x and y at different offsets modulo 16 bytes (no common
//   float4 split); no cluster of K fits this GPU: step07's launcher
// Mapping:  512 threads a CTA, two CTAs an SM. CTA k holds body slots [k*c, (k+1)*c) of its rows,
//           c = ceil(B / K) <= 4096: at most 8 float4 a thread.
// Fast math: exp2 and 1/x from the special-function unit (exp_ says why the error fits the 1e-5
//           tolerance). No other.
// Traffic:  where the cluster holds the row, 1 read and 1 write per element: 8*M*N bytes.
//           Elsewhere step07's.
// Limit:    the exchange comes after a row's last byte has arrived, each cluster takes a fixed
//           share of the rows, and a cluster is placed whole: wide clusters leave SMs idle and
//           few rows leave most clusters idle (docs/step08_cluster.md, "What limits it now").
// Run:      ./build/step08_cluster/step08_cluster --rows 1024 --cols 65539   (--help for options)
#include <cooperative_groups.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/cuda_check.h"
#include "common/softmax.h"
#include "common/step_table.h"
#include "step08.h"

namespace step08_cluster {

constexpr int kThreads = 512;
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kPacks = 8;                       // float4 a thread, at most
constexpr int kCtaSlots = kThreads * kPacks;    // 4096 float4, 16384 floats: one CTA's worth
constexpr int kMaxCluster = 16;                 // 9-16 are non-portable sizes
constexpr int kStageSlots = kCtaSlots + 8;      // a part, and up to 7 float4 of line_shift
constexpr unsigned kFullMask = 0xffffffffu;

// ---- The arithmetic: one exponential per element, pairs merged by the online rescaling ----

// exp(x) = 2^(x * log2 e) from the special-function unit (ex2.approx.ftz), as __expf without its
// subnormal fix-up: within 2 + 1.17*|x| ulp (CUDA programming guide), under 3e-6 relative where
// exp(x - max) >= 1e-8; smaller results are inside the 1e-8 absolute tolerance. exp(-inf) = 0;
// NaN stays NaN.
__device__ __forceinline__ float exp_(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

// 1 / s within 1 ulp (rcp.approx.ftz). A row's sum is 0 (only -inf), >= 1, +inf or NaN: never
// subnormal.
__device__ __forceinline__ float reciprocal(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return r;
}

// exp(part_max - max_val), which moves a sum taken against part_max onto max_val. Equal maxima
// give 1, infinite ones too: a part of only -inf (sum 0) or with a NaN (sum NaN) keeps 0 or NaN.
__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : exp_(part_max - max_val);
}

// Merges the pair (other_max, other_sum) into (max_val, sum). __fadd_rn keeps the compiler from
// fusing a product into the add, so merge(a, b) and merge(b, a) round alike: both lanes of a
// butterfly step end with the same bits.
__device__ __forceinline__ void merge(float& max_val, float& sum, float other_max,
                                      float other_sum) {
  const float new_max = fmaxf(max_val, other_max);
  sum = __fadd_rn(sum * rescale(max_val, new_max), other_sum * rescale(other_max, new_max));
  max_val = new_max;
}

// Every lane ends with the warp's merged pair (xor 16, 8, 4, 2, 1).
__device__ __forceinline__ void warp_reduce_pair(float& max_val, float& sum) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_max = __shfl_xor_sync(kFullMask, max_val, offset);
    const float other_sum = __shfl_xor_sync(kFullMask, sum, offset);
    merge(max_val, sum, other_max, other_sum);
  }
}

// The CTA's pair in every thread: warp butterflies, a pair a warp through shared memory, one
// barrier, a second butterfly over the 16 warp pairs. `pairs` (16 float2) alternates between two
// arrays by row parity: a warp racing ahead to the next row writes the other array, and it cannot
// get two rows ahead, which needs the next row's barrier, where the slow warp is awaited.
__device__ __forceinline__ void block_reduce_pair(float& max_val, float& sum, float2* pairs) {
  const int lane = threadIdx.x % kWarpSize;
  warp_reduce_pair(max_val, sum);
  if (lane == 0) pairs[threadIdx.x / kWarpSize] = make_float2(max_val, sum);
  __syncthreads();
  const float2 pair = lane < kWarps ? pairs[lane] : make_float2(-INFINITY, 0.f);
  max_val = pair.x;
  sum = pair.y;
  warp_reduce_pair(max_val, sum);
}

// ---- Where a CTA's part of a row lies ----

// Row `row` of a matrix whose x lies `lead` floats past a 16-byte boundary, as head, float4 body
// and tail, and the body slots [first, first + count) that CTA `rank` of the cluster holds.
struct RowPart {
  size_t start;  // the row's first element, from x
  int head;      // 0..3 floats before the body
  int tail_at;   // the first float after the body
  int tail;      // 0..3 floats after it
  int first;     // this CTA's first body slot
  int count;     // its slots, 0..chunk

  __device__ __forceinline__ RowPart(int lead, int64_t row, int cols, int rank, int chunk)
      : start(static_cast<size_t>(row) * cols) {
    // The row starts (lead + row*cols) % 4 floats past a boundary: 32-bit arithmetic wraps modulo
    // 2^32, which keeps the residue modulo 4.
    const unsigned row_lead = (unsigned(lead) + unsigned(row) * unsigned(cols)) % 4;
    head = min(int((4 - row_lead) % 4), cols);
    const int body = (cols - head) / 4;
    tail_at = head + 4 * body;
    tail = cols - tail_at;
    first = rank * chunk;
    count = max(0, min(chunk, body - first));
  }

  // This CTA's first slot in x, and in y (x and y share their offset modulo 16 bytes: the
  // launcher checks).
  __device__ __forceinline__ const float4* in(const float* x) const {
    return reinterpret_cast<const float4*>(x + start + head) + first;
  }
  __device__ __forceinline__ float4* out(float* y) const {
    return reinterpret_cast<float4*>(y + start + head) + first;
  }
};

__device__ __forceinline__ int lead_of(const float* p) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(float) % 4);
}

// Which float4 of its 128-byte line p is (0..7).
__device__ __forceinline__ int slot_in_line(const float4* p) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(float4) % 8);
}

// Where a part goes in the stage: 0..7 float4 in, so that its address in shared memory and in
// global memory agree modulo 128 bytes. Each 128-byte line of the row then fills one 128-byte row
// of shared memory's banks instead of straddling two.
__device__ __forceinline__ int line_shift(const float4* p, uint32_t stage) {
  return static_cast<int>((reinterpret_cast<uintptr_t>(p) / sizeof(float4) - stage / 16) % 8);
}

// The slot thread t holds in its k-th pack, for a part whose first slot is `in_line` float4 into
// its line: t + 512k - in_line, except that the first in_line threads of pack 0, which would fall
// before the part, take the last in_line slots of the 4096. Every warp's 32 slots then cover whole
// 128-byte lines (4 lines, 16 sectors) where slot t + 512k would touch 5 lines and 17 sectors.
__device__ __forceinline__ int lined_slot(int t, int k, int in_line) {
  const int s = t + k * kThreads - in_line;
  return k == 0 && s < 0 ? s + kCtaSlots : s;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---- Clusters, mbarriers and bulk copies (sm_90), in PTX ----

// A shared-memory address as the 32-bit shared-window address PTX takes, and the same place in
// the shared memory of CTA `rank` of the cluster (distributed shared memory).
__device__ __forceinline__ uint32_t smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t in_cta(uint32_t at, int rank) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(rank));
  return remote;
}

// An mbarrier counts arrivals (here one a phase, by thread 0) and bytes: a phase completes once
// its arrival has come and every byte it was told to expect has landed.
__device__ __forceinline__ void mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Spins until the phase of parity `phase` (0, 1, 0, ...: the phases in turn) has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(phase)
        : "memory");
  } while (!done);
}

// `bytes` (a multiple of 16, both ends 16-byte aligned) from global to shared memory by the copy
// engine; they count off the mbarrier as they land.
__device__ __forceinline__ void bulk_copy(uint32_t to, const float4* from, uint32_t bytes,
                                          uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(to), "l"(from), "r"(bytes), "r"(bar)
      : "memory");
}

// A pair into another CTA's shared memory (`to` and `bar` from in_cta); its 8 bytes count off
// that CTA's mbarrier when they land. Nobody waits for the store itself.
__device__ __forceinline__ void send_pair(uint32_t to, float max_val, float sum, uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
          to),
      "f"(max_val), "f"(sum), "r"(bar)
      : "memory");
}

// A barrier across the cluster without cluster.sync()'s release: that one makes each thread wait
// until its earlier stores have landed (a MEMBAR), which nothing here needs.
__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// Thread 0 asks the copy engine for this CTA's part of row `row` (nothing past the last row):
// `count` float4 into the stage, line_shift float4 in, counted by the stage's mbarrier. Every
// thread returns the head or tail float it holds of that row (threads 0-2 of CTA 0 and K-1), or
// -inf, which adds nothing to a max and exp(-inf) = 0 to a sum.
__device__ __forceinline__ float fetch_part(const float* x, int lead, int64_t row, int rows,
                                            int cols, int rank, int parts, int chunk,
                                            uint32_t stage, uint32_t stage_bar) {
  if (row >= rows) return -INFINITY;
  const RowPart p(lead, row, cols, rank, chunk);
  const int t = threadIdx.x;
  if (t == 0) {
    const float4* in = p.in(x);
    const uint32_t bytes = uint32_t(p.count) * uint32_t(sizeof(float4));
    mbar_arrive_expect(stage_bar, bytes);  // with 0 bytes the phase completes at once
    if (bytes != 0) bulk_copy(stage + line_shift(in, stage) * 16u, in, bytes, stage_bar);
  }
  if (rank == 0 && t < p.head) return x[p.start + t];
  if (rank == parts - 1 && t < p.tail) return x[p.start + p.tail_at + t];
  return -INFINITY;
}
#endif

// ---- The kernel ----

// A cluster of K CTAs per row, persistent: cluster g takes rows g, g + G, g + 2G, ... (G clusters
// launched), CTA k of it part k of each. Dynamic shared memory: kStageSlots float4, the stage.
// Per row: wait for the part in the stage, take it into registers, the thread's pair, the CTA's
// pair (one __syncthreads), refill the stage with the next row, exchange the pairs, store.
//
// Synchronisation, and why it is enough:
//  - at the start, one cluster barrier: no CTA sends a pair to an mbarrier not yet set up;
//  - the stage is refilled only after the block reduction's __syncthreads, when every thread has
//    taken its slots out of it; its mbarrier completes one phase a row, in row order;
//  - pairs[set] and its mbarrier alternate by row parity (set = use % 2, use = the CTA's count
//    of rows). A CTA sends its pair of row use + 2 into pairs[set] of CTA j only after it has
//    received all K pairs of row use + 1, CTA j's among them; CTA j sends that one only after
//    its block reduction of row use + 1, whose __syncthreads comes after every warp of CTA j has
//    read pairs[set] for row use. So no pair overwrites one that is still to be read, and none
//    lands on a phase its receiver has not yet completed. A pair that lands before its receiver
//    has announced the row's bytes drives the count below zero, which the mbarrier allows: the
//    phase still needs the receiver's own arrival;
//  - at the end, one cluster barrier: a CTA arrives after its last wait, so every pair it sent
//    has landed (each receiver waited for it) before any CTA of the cluster exits and its shared
//    memory goes away.
// Every CTA of a cluster takes the same rows, so all pass the same barriers and waits.
__global__ void __launch_bounds__(kThreads, 2)
    cluster_rows_kernel(const float* x, float* y, int rows, int cols, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ float4 stage[];
  __shared__ float2 warp_pairs[2][kWarps];      // the block reduction's, by row parity
  __shared__ float2 pairs[2][kMaxCluster];      // the K pairs of a row, by row parity
  __shared__ uint64_t pairs_in[2];              // their mbarriers
  __shared__ uint64_t stage_in;                 // the stage's mbarrier
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int parts = static_cast<int>(cluster.num_blocks());  // K
  const int64_t groups = gridDim.x / parts;
  const int lead = lead_of(x);
  const int t = threadIdx.x, lane = t % kWarpSize;
  const uint32_t stage_at = smem(stage), stage_bar = smem(&stage_in);
  if (t == 0) {
    mbar_init(stage_bar);
    mbar_init(smem(&pairs_in[0]));
    mbar_init(smem(&pairs_in[1]));
    // The set-up visible to the cluster, and to the copy engine.
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  float next_edge =
      fetch_part(x, lead, blockIdx.x / parts, rows, cols, rank, parts, chunk, stage_at, stage_bar);
  cluster_barrier();

  uint32_t use = 0;  // rows this CTA has taken; wraps modulo 2^32, which keeps its low two bits
  for (int64_t row = blockIdx.x / parts; row < rows; row += groups, ++use) {
    const RowPart p(lead, row, cols, rank, chunk);
    const float4* in = p.in(x);
    const int in_line = slot_in_line(in), shift = line_shift(in, stage_at);
    // The part, from the stage into registers: 8 float4 a thread, -inf past the part's end.
    mbar_wait(stage_bar, use & 1);
    float v[kPacks][4];
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int s = lined_slot(t, k, in_line);
      const float4 c =
          s < p.count ? stage[shift + s] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      v[k][0] = c.x, v[k][1] = c.y, v[k][2] = c.z, v[k][3] = c.w;
    }
    float edge = next_edge;

    // The thread's pair: its max, one exp per element against it (against 0 where the thread
    // saw only -inf), kept for the store, and their sum. Then the CTA's pair.
    float thread_max = edge;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) thread_max = fmaxf(thread_max, v[k][j]);
    const float base = thread_max == -INFINITY ? 0.f : thread_max;
    edge = exp_(edge - base);
    float sum = edge;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[k][j] = exp_(v[k][j] - base);
        sum += v[k][j];
      }
    float max_val = thread_max;
    block_reduce_pair(max_val, sum, warp_pairs[use & 1]);

    // Every thread has read the stage (the reduction's barrier): the next row's part goes in.
    next_edge =
        fetch_part(x, lead, row + groups, rows, cols, rank, parts, chunk, stage_at, stage_bar);

    // The exchange: thread 0 announces K pairs' bytes on this row's mbarrier; thread j < K sends
    // the CTA's pair into slot `rank` of CTA j's pairs[set]; all wait; every warp merges the K.
    const int set = static_cast<int>(use & 1);
    const uint32_t bar = smem(&pairs_in[set]);
    if (t == 0) mbar_arrive_expect(bar, uint32_t(parts) * uint32_t(sizeof(float2)));
    if (t < parts) send_pair(in_cta(smem(&pairs[set][rank]), t), max_val, sum, in_cta(bar, t));
    mbar_wait(bar, (use >> 1) & 1);
    const float2 pair = lane < parts ? pairs[set][lane] : make_float2(-INFINITY, 0.f);
    float row_max = pair.x, row_sum = pair.y;
    warp_reduce_pair(row_max, row_sum);

    // y = exp(x - base) * exp(base - row max) / row sum. A thread that saw only -inf holds zeros:
    // its factor is 0 / row sum, which is 0, or NaN when the row's sum is NaN (a NaN or +inf in
    // the row). A row of only -inf has sum 0: 0 / 0, NaN, as in torch.
    const float factor =
        (thread_max == -INFINITY ? 0.f : rescale(thread_max, row_max)) * reciprocal(row_sum);
    float4* out = p.out(y);
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int s = lined_slot(t, k, in_line);
      if (s < p.count)
        out[s] = make_float4(v[k][0] * factor, v[k][1] * factor, v[k][2] * factor,
                             v[k][3] * factor);
    }
    if (rank == 0 && t < p.head) y[p.start + t] = edge * factor;
    if (rank == parts - 1 && t < p.tail) y[p.start + p.tail_at + t] = edge * factor;
  }
  cluster_barrier();
#else
  __trap();  // launched only where clusters_usable() (sm_90 and later)
#endif
}

// ---- Host: the plan and the launch ----

namespace {

constexpr size_t kStageBytes = kStageSlots * sizeof(float4);  // 65,664 bytes

// What the launcher knows about a device, found once: whether the kernel runs there, and how many
// clusters of K CTAs fit at once (cudaOccupancyMaxActiveClusters; 0: rows take step07's launcher).
struct DevicePlan {
  bool usable = false;
  int fit[kMaxCluster + 1] = {};
  std::string report;
};

cudaLaunchConfig_t cluster_config(int k, int64_t clusters, cudaStream_t stream,
                                  cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(k);
  attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * k));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kStageBytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

DevicePlan find_plan(int device) {
  DevicePlan plan;
  int major = 0, minor = 0, cluster_launch = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device));
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  const std::string fallback = "; every row takes step07's launcher";
  if (major < 9 || !cluster_launch) {
    plan.report = "thread block clusters: none on this GPU (" + arch + "; they need sm_90)" +
                  fallback;
    return plan;
  }
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, cluster_rows_kernel));
  if (attributes.ptxVersion < 90) {
    plan.report = "thread block clusters: this build has no sm_90 code for " + arch + fallback;
    return plan;
  }
  const auto kernel = cluster_rows_kernel;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kStageBytes)));
  // Clusters of 9-16 are non-portable: a GPU may refuse them (then none of them fit), where
  // one of 2-8 that does not fit is answered with 0.
  const bool wide = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                         1) == cudaSuccess;
  if (!wide) cudaGetLastError();  // clear the refusal
  for (int k = 2; k <= (wide ? kMaxCluster : 8); ++k) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cluster_config(k, 1, 0, &attr);
    const cudaError_t err = cudaOccupancyMaxActiveClusters(&plan.fit[k], kernel, &cfg);
    if (err == cudaSuccess) continue;
    if (k <= 8) CUDA_CHECK(err);
    cudaGetLastError();
    plan.fit[k] = 0;
  }
  plan.usable = true;
  plan.report = "thread block clusters: yes (" + arch + "): rows of 16388-262147 floats take " +
                "clusters of 2-16 CTAs (" + std::to_string(plan.fit[2]) + " of 2, " +
                std::to_string(plan.fit[16]) + " of 16 fit at once); other rows step07's launcher";
  return plan;
}

// The plan of the current device; without a usable device, one that takes no clusters.
const DevicePlan& device_plan() {
  static std::mutex mutex;
  static std::unordered_map<int, DevicePlan> plans;  // node-based: references stay valid
  static const DevicePlan none{false, {}, "thread block clusters: no usable CUDA device"};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return none;
  }
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = plans.find(device);
  if (found != plans.end()) return found->second;
  return plans.emplace(device, find_plan(device)).first->second;
}

}  // namespace

bool clusters_usable() { return device_plan().usable; }

std::string cluster_report() { return device_plan().report; }

int cluster_size(int cols) {
  const int64_t slots = cols / 4;  // the most body slots a row of cols floats has
  if (slots <= kCtaSlots || slots > int64_t(kMaxCluster) * kCtaSlots) return 0;
  const int k = static_cast<int>((slots + kCtaSlots - 1) / kCtaSlots);
  const DevicePlan& plan = device_plan();
  return plan.usable && plan.fit[k] > 0 ? k : 0;
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step08_cluster", x, y, rows, cols, softmax::kNoColLimit);
  const int k = cluster_size(cols);
  // x and y must split alike: the same offset modulo 16 bytes (true of in-place calls and of
  // buffers from any allocator). The difference wraps modulo 2^64, a multiple of 16.
  const uintptr_t apart = reinterpret_cast<uintptr_t>(x) - reinterpret_cast<uintptr_t>(y);
  if (k == 0 || apart % 16 != 0) return step07_persistent::step().launch(x, y, rows, cols, stream);
  // Persistent and balanced: the fewest rounds of the clusters that fit, and as many clusters as
  // give each the same rows or one fewer (64 rows, 14 fit: 13 clusters, 5 rounds, none idle).
  const int64_t fit = device_plan().fit[k];
  const int64_t rounds = (rows + fit - 1) / fit;
  const int64_t clusters = (rows + rounds - 1) / rounds;
  const int chunk = static_cast<int>((cols / 4 + k - 1) / k);
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(k, clusters, stream, &attr);
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, cluster_rows_kernel, x, y, rows, cols, chunk));
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }

// The cluster holds the row: the fused ideal. Otherwise step07's model for the row it takes.
softmax::Traffic traffic(int cols) {
  if (cluster_size(cols) > 0) return softmax::kIdealTraffic;
  return step07_persistent::step().traffic(cols);
}

const softmax::Step& step() {
  static const softmax::Step s{
      "step08_cluster",
      "a long row split over a thread block cluster, its (max, sum) exchanged through distributed "
      "shared memory",
      launch, max_cols, traffic};
  return s;
}

}  // namespace step08_cluster
