// SPDX-License-Identifier: MIT
// fastsoftmax, host side of typed_rows.cuh and typed_smem.cuh: which mapping a 16-bit forward or
// any backward takes (docs/library.md, "Other dtypes and the backward pass"), and its launch.
// Included once per dtype (typed_f32.cu, typed_f16.cu, typed_bf16.cu) so the dtypes compile in
// parallel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "check.h"
#include "launch.cuh"
#include "plan_record.h"
#include "short_rules.h"
#include "split.h"
#include "typed_rows.cuh"
#include "typed_smem.cuh"

namespace fastsoftmax::detail {

template <typename T>
const char* dtype_name();
template <>
inline const char* dtype_name<float>() {
  return "float32";
}
template <>
inline const char* dtype_name<__half>() {
  return "float16";
}
template <>
inline const char* dtype_name<__nv_bfloat16>() {
  return "bfloat16";
}

// Values a thread holds a stream, in a block a row: 32 for the forward (one stream), 16 each for
// y and dy in the backward. About 24 registers more for addresses and sums keep a block of 1024
// under the 64 registers a thread that it may use.
constexpr int typed_block_values(bool backward) { return backward ? 16 : 32; }

template <typename T, int kVec, int kThreads, int kPacks, bool kBackward,
          int kBlock = typed_block_threads<kThreads>()>
void launch_typed_rows(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kBlock / kThreads;
  // One row a group, one block a row past a warp: the hardware hands an SM a new block as one
  // finishes. A persistent grid of groups, capped at 2048 threads an SM, lost on many rows: more
  // blocks than registers let an SM hold, so those past them waited for whole blocks' rows. On
  // the H200, bf16 200000x1300 forward 0.87 of memcpy against 1.00 a row a group, 500000x1025
  // 0.86 against 0.98; balanced over the blocks the SMs hold, 16384x1649 0.91 against 0.96.
  const int64_t blocks = (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") + ", " +
                std::to_string(kThreads) + " threads a row, " + std::to_string(kPacks) +
                " packs of " + std::to_string(kVec) + " a thread" +
                (kBlock == kWarpSize && kThreads == kWarpSize ? ", blocks of one warp" : ""));
  }
  if (recorded(blocks, kBlock)) return;
  typed_rows_kernel<T, kVec, kThreads, kPacks, kBackward, kBlock>
      <<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(a, b, out, rows, cols);
  FS_CHECK_LAUNCH();
}

template <typename T, int kThreads, int kPacks, bool kBackward>
void launch_typed_words(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") + ", " +
                std::to_string(kThreads) + " threads a row, " + std::to_string(kPacks) +
                " packs of 8 a thread held in the dtype");
  }
  if (recorded(rows, kThreads)) return;
  typed_words_kernel<T, kThreads, kPacks, kBackward>
      <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(a, b, out, rows, cols, 0);
  FS_CHECK_LAUNCH();
}

template <typename T, int kVec, bool kBackward>
void launch_typed_two_pass(const T* a, const T* b, T* out, int rows, int cols,
                           cudaStream_t stream) {
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") +
                ", a block a row, packs of " + std::to_string(kVec));
  }
  if (recorded(rows, kTypedTwoPassThreads)) return;
  typed_two_pass_kernel<T, kVec, kBackward>
      <<<static_cast<unsigned>(rows), kTypedTwoPassThreads, 0, stream>>>(a, b, out, rows, cols, 1);
  FS_CHECK_LAUNCH();
}

// typed_spread's pairs' area (g_typed_spread) is one a device in each dtype's file, so its turns
// are too (internal linkage: one copy a file).
namespace {
LaunchTurns& spread_turns() {
  static LaunchTurns turns;
  return turns;
}
}  // namespace

// Blocks a row for typed_spread: as many as keep every row's blocks in one wave of both launches,
// at most one pair a thread for the merge (512) and at least 1024 packs a block; 1: not worth
// spreading (the row takes typed_two_pass).
template <typename T, int kVec, bool kBackward>
int typed_spread_parts(int rows, int64_t packs) {
  int partials = 0, apply = 0;  // blocks an SM of each launch
  FS_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &partials, typed_two_pass_kernel<T, kVec, kBackward, TypedPass::kPartials>,
      kTypedTwoPassThreads, 0));
  FS_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &apply, typed_two_pass_kernel<T, kVec, kBackward, TypedPass::kApply>, kTypedTwoPassThreads,
      0));
  const int64_t resident = int64_t(std::min(partials, apply)) * device_info().sms;
  const int64_t parts = std::min<int64_t>({resident / std::max(rows, 1), kTypedTwoPassThreads,
                                           packs / 1024, kTypedSpreadPairs / std::max(rows, 1)});
  return parts >= 2 ? static_cast<int>(parts) : 1;
}

template <typename T, int kVec, bool kBackward>
void launch_typed_spread(const T* a, const T* b, T* out, int rows, int cols, int parts,
                         cudaStream_t stream) {
  const int64_t blocks = int64_t(rows) * parts;
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") + ", " +
                std::to_string(parts) + " blocks a row in two launches, packs of " +
                std::to_string(kVec));
  }
  if (recorded(blocks, kTypedTwoPassThreads)) return;
  spread_turns().take(stream, [&](int) {
    const auto grid = static_cast<unsigned>(blocks);
    typed_two_pass_kernel<T, kVec, kBackward, TypedPass::kPartials>
        <<<grid, kTypedTwoPassThreads, 0, stream>>>(a, b, out, rows, cols, parts);
    FS_CHECK_LAUNCH();
    typed_two_pass_kernel<T, kVec, kBackward, TypedPass::kApply>
        <<<grid, kTypedTwoPassThreads, 0, stream>>>(a, b, out, rows, cols, parts);
    FS_CHECK_LAUNCH();
  });
}

// The limits of `typed_smem` on this device for one kernel, looked up once a device and kernel
// (which also sets the kernel's attributes): the dynamic shared memory a CTA may take with
// `share` CTAs an SM (4 for CTAs of 256 threads, 2 for 512), and alone on one.
struct TypedSmemBudget {
  int64_t shared = 0, alone = 0;
};

template <typename Kernel>
TypedSmemBudget typed_smem_budget(Kernel kernel, int share) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, TypedSmemBudget> cache;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  const auto key = std::make_pair(device, reinterpret_cast<const void*>(kernel));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  int optin = 0, sm_bytes = 0, reserved = 0;
  FS_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  FS_CHECK(cudaDeviceGetAttribute(&sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  FS_CHECK(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  cudaFuncAttributes attributes{};
  FS_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int fixed = static_cast<int>(attributes.sharedSizeBytes);
  TypedSmemBudget budget;
  budget.alone = optin - fixed;
  budget.shared = std::min<int64_t>(budget.alone, sm_bytes / share - reserved - fixed);
  FS_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(budget.alone)));
  // Clusters of 9-16 are not portable: where the GPU refuses them, none fit (the plan falls back).
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
      cudaSuccess)
    (void)cudaGetLastError();
  return cache.emplace(key, budget).first->second;
}

// A launch of `blocks` CTAs of `threads` in clusters of `ctas`; `attr` must outlive it.
inline cudaLaunchConfig_t typed_cluster_config(int64_t blocks, int ctas, int threads, size_t bytes,
                                               cudaStream_t stream, cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(ctas);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// How many clusters of `ctas` CTAs of `threads` with `bytes` of dynamic shared memory each fit on
// the GPU at once (0: none, or a cluster size the GPU cannot form). Cached.
template <typename Kernel>
int64_t typed_clusters_that_fit(Kernel kernel, int threads, int ctas, size_t bytes) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, int, size_t>, int64_t> cache;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), ctas, bytes);
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = typed_cluster_config(ctas, ctas, threads, bytes, 0, &attr);
  int clusters = 0;
  if (ctas == 1) {  // no cluster launch: the blocks an SM
    FS_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&clusters, kernel, threads, bytes));
    clusters *= device_info().sms;
  } else if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    clusters = 0;
  }
  return cache.emplace(key, clusters).first->second;
}

// FASTSOFTMAX_TYPED_CLUSTER_WORDS=0 turns the word clusters off, so that rows go on to typed_smem
// (the tests use it to reach typed_smem at the lengths the word clusters take).
inline bool typed_cluster_words_on() {
  const char* v = std::getenv("FASTSOFTMAX_TYPED_CLUSTER_WORDS");  // read each call: tests set it
  return v == nullptr || std::string(v) != "0";
}

static_assert(kTypedMaxCluster <= kWordsMaxCluster, "the word kernel's pushed pairs hold 16 CTAs");

// How the staged backward copies dy (FASTSOFTMAX_TYPED_STAGED_BULK, read each call): unset, by
// the rule in launch_typed_words_cluster_of; "0", 16 bytes a thread by cp.async; "1", a bulk copy.
inline int typed_staged_bulk_setting() {
  const char* v = std::getenv("FASTSOFTMAX_TYPED_STAGED_BULK");
  return v == nullptr ? -1 : std::string(v) == "0" ? 0 : 1;
}

// Rounds of the word clusters that fit from which the grid queues clusters (see below).
constexpr int64_t kTypedQueuedRounds = 8;

// Word blocks across a cluster (typed_words_kernel with kCluster): CTAs of 512 threads holding up
// to 8 packs a thread forward (4096 packs, 32K elements a CTA) or 4 of each stream backward (2048
// packs: 16K elements in 16-bit, 8K in float32), two CTAs an SM; a row takes the fewest CTAs that
// hold it, 2 to 16. False where that is not 2-16 CTAs, clusters are not usable, or none fits (the
// caller goes on to typed_smem).
//   How many clusters: the balanced count (every cluster the same number of rows, or one fewer, all
// resident at once), except over kTypedQueuedRounds rounds or more of the clusters that fit. There
// the grid holds far more clusters than fit, queued, and the hardware starts one wherever one ends,
// so that no cluster's fixed share decides the time: the forward a cluster a row, the backward a
// cluster per two rows. On the H200, long rows in bf16 forward (1024x131072) went from 0.86 of
// memcpy to 0.96 and 256x524288 from 0.77 to 0.86; the backward in float32 at 1024x131072 from
// 0.976 to 1.007 and at 2048x65536 from 1.005 to 1.030, in bf16 at 256x524288 from 0.80 to 0.85.
// A cluster a row did no better in the backward at 64K-131K and lost at 262K-524K.
template <typename T, bool kBackward, int kMaxPacks, bool kStaged = false>
bool launch_typed_words_cluster_of(const T* a, const T* b, T* out, int rows, int cols,
                                   int64_t packs, cudaStream_t stream) {
  constexpr int kThreads = 512;
  constexpr int64_t kPerCta = int64_t(kThreads) * kMaxPacks;
  const int64_t ctas = (packs + kPerCta - 1) / kPerCta;
  if (ctas < 2 || ctas > kTypedMaxCluster || !clusters_usable() || !typed_cluster_words_on())
    return false;
  const int chunk = static_cast<int>((packs + ctas - 1) / ctas);
  bool launched = false;
  // The backward takes CTAs of 8 packs only past 16 CTAs of 4 (32768 packs): 9 CTAs or more, at
  // least 3641 packs each, so always 8 packs a thread.
  constexpr int kFewest = kBackward && kMaxPacks == 8 ? 8 : kMaxPacks / 2 + 1;
  with_packs<kFewest, kMaxPacks>((chunk + kThreads - 1) / kThreads, [&](auto p) {
    constexpr int P = decltype(p)::value;
    const auto copies = typed_words_kernel<T, kThreads, P, kBackward, true, kStaged>;
    const auto bulk = typed_words_kernel<T, kThreads, P, kBackward, true, kStaged, kStaged>;
    const size_t bytes = kStaged ? size_t(P) * kThreads * 16 : 0;
    for (const auto kernel : {copies, bulk}) {
      // Clusters of 9-16 are not portable: where the GPU refuses them, none fit.
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
          cudaSuccess)
        (void)cudaGetLastError();
      if (kStaged && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
      }
    }
    const int64_t fit = typed_clusters_that_fit(copies, kThreads, static_cast<int>(ctas), bytes);
    if (fit == 0) return;
    launched = true;
    note("typed_words_cluster",
         "rows past a block's registers that 2-16 CTAs hold in registers in their dtype: a "
         "cluster a row");
    const int64_t rounds = (rows + fit - 1) / fit;
    const bool queued = rounds >= kTypedQueuedRounds;
    const int64_t clusters = !queued     ? (rows + rounds - 1) / rounds
                             : kBackward ? (rows + 1) / 2
                                         : rows;
    // Staged dy by one bulk copy a row where every CTA's packs start on a 128-byte line (dy
    // 128-byte aligned, rows of whole lines, y 16-byte aligned so the body starts at the row, and
    // a chunk of whole lines) and the clusters are queued. On the H200 that took float32
    // 512x262144 from 0.89 of memcpy to 0.92 and bf16 256x524288 from 0.82 to 0.87; it lost where
    // the CTAs start off the lines (float32 511x262147 0.93 -> 0.89, bf16 255x524291 0.88 ->
    // 0.87) and on the resident clusters of 64x262144 (0.75 -> 0.70). It still loses a little at
    // 128-160 rows of 262144 floats (8-10 rounds: 0.83 -> 0.81).
    constexpr int kLine = 128 / 16;  // packs a line
    const int lined = (chunk + kLine - 1) / kLine * kLine;
    const bool on_lines = reinterpret_cast<uintptr_t>(b) % 128 == 0 &&
                          reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                          int64_t(cols) * int64_t(sizeof(T)) % 128 == 0;
    const int setting = typed_staged_bulk_setting();
    const bool by_bulk = kStaged && (setting < 0 ? queued && on_lines : setting == 1);
    const auto kernel = by_bulk ? bulk : copies;
    const int ctas_chunk = by_bulk ? lined : chunk;
    if (recording()) {
      name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") +
                  ", clusters of " + std::to_string(ctas) + " CTAs of " + std::to_string(kThreads) +
                  " threads a row, " + std::to_string(P) + " packs of " +
                  std::to_string(16 / sizeof(T)) + " a thread held in the dtype" +
                  (!kStaged  ? ", "
                   : by_bulk ? " (dy in shared memory by bulk copies), "
                             : " (dy in shared memory), ") +
                  (queued ? (kBackward ? "queued, two rows a cluster" : "queued, a row a cluster")
                          : std::to_string(clusters) + " clusters resident"));
    }
    const int64_t blocks = clusters * ctas;
    if (recorded(blocks, kThreads)) return;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg =
        typed_cluster_config(blocks, static_cast<int>(ctas), kThreads, bytes, stream, &attr);
    FS_CHECK(cudaLaunchKernelEx(&cfg, kernel, a, b, out, rows, cols, ctas_chunk));
  });
  return launched;
}

// The backward tries CTAs of 4 packs of each stream (two an SM), then of 8 with dy in shared
// memory (two an SM: 16 CTAs then hold 256K floats or 512K 16-bit values); the forward CTAs of 8
// packs. Holding both streams' 8 packs in registers took 116 registers, one CTA an SM: staging dy
// took float32 511x262147 from 0.88 of memcpy to 0.93 and 512x262144 to 0.90, fp16 256x524288
// from 0.71 to 0.86 (H200).
template <typename T, bool kBackward>
bool launch_typed_words_cluster(const T* a, const T* b, T* out, int rows, int cols, int64_t packs,
                                cudaStream_t stream) {
  if constexpr (kBackward) {
    if (launch_typed_words_cluster_of<T, true, 4>(a, b, out, rows, cols, packs, stream))
      return true;
    if ((packs + 2047) / 2048 <= kTypedMaxCluster) return false;  // fit failed, not the length
    return launch_typed_words_cluster_of<T, true, 8, true>(a, b, out, rows, cols, packs, stream);
  } else {
    return launch_typed_words_cluster_of<T, false, 8>(a, b, out, rows, cols, packs, stream);
  }
}

struct TypedSmemPlan {
  bool async = false;  // cp.async for the whole part (clusters), else through registers
  int threads = 0;     // a CTA's
  int ctas = 0;        // a cluster's CTAs, one row a cluster; 0: the row does not fit
  int chunk = 0;       // body packs of each stream a CTA holds
  size_t bytes = 0;
  int64_t clusters = 0;
  bool alone = false;  // CTAs sized one an SM (a row past 16 CTAs two an SM)
};

// A row that fits a quarter of an SM's shared memory: one CTA of 256 threads, four an SM. Larger:
// CTAs of 512, one a row where it fits half an SM (two an SM), else the fewest that fit two an SM,
// then one. (Measured on the H200: splitting a row to reach four CTAs an SM, or a cluster of 2
// where one CTA would do, was slower; see docs/notes/tuning.md.) On few rows, more CTAs a row, up
// to the SMs over the rows (at least 512 packs a CTA); if those clusters cannot be formed, the
// fewest again. Without clusters (before sm_90, or turned off) a row takes one CTA if one holds
// it.
template <typename T, int kVec, bool kBackward>
TypedSmemPlan plan_typed_smem(int rows, int cols) {
  constexpr int64_t kPackBytes = 16 * (kBackward ? 2 : 1);
  const int64_t packs = std::max<int64_t>(1, cols / kVec);  // the most body packs a row has
  const int64_t bytes = packs * kPackBytes;
  const auto narrow = typed_smem_kernel<T, kVec, 256, kBackward, false>;
  const auto wide = typed_smem_kernel<T, kVec, 512, kBackward, false>;
  const TypedSmemBudget four = typed_smem_budget(narrow, 4), two = typed_smem_budget(wide, 2);
  // CTAs for the row at whole packs a CTA within `budget` bytes (a part is whole packs: the
  // budgets are not multiples of a pack's bytes).
  const auto parts = [&](int64_t budget) {
    const int64_t per = budget / kPackBytes;
    return (packs + per - 1) / per;
  };
  // Clusters as the rest of the library uses them: sm_90 with this build's cluster code, and not
  // turned off (set_clusters_enabled, FASTSOFTMAX_NO_CLUSTERS).
  const bool clusters = clusters_usable();
  TypedSmemPlan plan;
  int64_t ctas = 1;
  plan.threads = 256;
  if (bytes > four.shared) {
    plan.threads = 512;
    ctas = parts(two.shared);
    if (ctas > kTypedMaxCluster) {
      ctas = parts(two.alone);
      plan.alone = true;
    }
    if (ctas > kTypedMaxCluster) return {};
    if (ctas > 1 && !clusters) {
      if (bytes > two.alone) return {};
      ctas = 1;
    }
  }
  const int64_t fewest = ctas;
  const int64_t sms = device_info().sms;
  if (rows * ctas < sms && clusters) {
    ctas = std::max(ctas, std::min<int64_t>({kTypedMaxCluster, sms / rows, packs / 512}));
  }
  // A CTA alone on its row loads through registers; the CTAs of a cluster by cp.async. The
  // variants' static shared memory is the same, so the budgets above hold for both.
  const auto narrow_async = typed_smem_kernel<T, kVec, 256, kBackward, true>;
  const auto wide_async = typed_smem_kernel<T, kVec, 512, kBackward, true>;
  const auto fit_with = [&](int64_t c) {
    plan.ctas = static_cast<int>(c);
    plan.chunk = static_cast<int>((packs + c - 1) / c);
    plan.bytes = static_cast<size_t>(plan.chunk * kPackBytes);
    plan.async = c > 1;
    const auto kernel = plan.threads == 256 ? (plan.async ? narrow_async : narrow)
                                            : (plan.async ? wide_async : wide);
    typed_smem_budget(kernel, plan.threads == 256 ? 4 : 2);  // sets its attributes
    return typed_clusters_that_fit(kernel, plan.threads, plan.ctas, plan.bytes);
  };
  int64_t fit = fit_with(ctas);
  if (fit == 0 && ctas != fewest) fit = fit_with(fewest);
  if (fit == 0) return {};
  const int64_t rounds = (rows + fit - 1) / fit;
  plan.clusters = (rows + rounds - 1) / rounds;
  return plan;
}

template <typename T, int kVec, bool kBackward>
void launch_typed_smem(const TypedSmemPlan& plan, const T* a, const T* b, T* out, int rows,
                       int cols, cudaStream_t stream) {
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") +
                ", clusters of " + std::to_string(plan.ctas) + " CTAs a row, " +
                std::to_string(plan.chunk) + " packs of " + std::to_string(kVec) + " a CTA" +
                (plan.async ? ", cp.async" : ""));
  }
  const int64_t blocks = plan.clusters * plan.ctas;
  if (recorded(blocks, plan.threads, plan.bytes)) return;
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg =
      typed_cluster_config(blocks, plan.ctas, plan.threads, plan.bytes, stream, &attr);
  cfg.numAttrs = plan.ctas > 1 ? 1 : 0;  // a CTA a row needs no cluster (nor sm_90)
  const auto kernel = plan.threads == 256
                          ? (plan.async ? typed_smem_kernel<T, kVec, 256, kBackward, true>
                                        : typed_smem_kernel<T, kVec, 256, kBackward, false>)
                          : (plan.async ? typed_smem_kernel<T, kVec, 512, kBackward, true>
                                        : typed_smem_kernel<T, kVec, 512, kBackward, false>);
  FS_CHECK(cudaLaunchKernelEx(&cfg, kernel, a, b, out, rows, cols, plan.chunk));
}

// Values a thread holds in registers as float32 over its streams, at most: 64 (the float32 `block`
// holds up to 16 float4), so 8 packs of 8 in the 16-bit forward, 4 of each stream in the 16-bit
// backward, 8 of 4 of each in the float32 backward. (16-bit blocks past the forward's 128 threads
// hold words in the dtype instead: up to 8 packs of each stream.)
template <typename T, bool kBackward>
constexpr int typed_max_packs() {
  return 64 / (kBackward ? 2 : 1) / (16 / int(sizeof(T)));
}

// 16-byte packs: a group of 1-32 lanes up to 32 packs (one a lane); a warp with 2 to kMax packs a
// lane; blocks with just enough packs a thread to cover the row (padding costs registers, and
// registers decide how many rows an SM has in flight): in 16-bit, words in the dtype in blocks of
// 128-1024 threads (see below where the forward keeps float32), else float32 in blocks of 128 and
// 256 threads (1024 in the float32 backward); past those, words across a cluster of 2-16 CTAs
// (16-bit, and the float32 backward), then the row in shared memory (typed_smem.cuh); past what
// 16 CTAs hold, or on few rows that would leave SMs idle, two passes over several blocks a row
// (typed_spread) or one (typed_two_pass).
template <typename T, int kVec, bool kBackward>
void launch_typed_packed(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  constexpr int kMax = typed_max_packs<T, kBackward>();
  const int64_t packs = cols / kVec;  // the most body packs a row has (edges are held apart)
  const auto per = [&](int threads) { return (packs + threads - 1) / threads; };
  if (packs <= 32) {
    note("typed_group",
         "rows of at most 32 packs: a group of lanes a row, one pack a lane, the row in "
         "registers");
    if (packs <= 1)
      return launch_typed_rows<T, kVec, 1, 1, kBackward>(a, b, out, rows, cols, stream);
    if (packs <= 2)
      return launch_typed_rows<T, kVec, 2, 1, kBackward>(a, b, out, rows, cols, stream);
    if (packs <= 4)
      return launch_typed_rows<T, kVec, 4, 1, kBackward>(a, b, out, rows, cols, stream);
    if (packs <= 8)
      return launch_typed_rows<T, kVec, 8, 1, kBackward>(a, b, out, rows, cols, stream);
    if (packs <= 16)
      return launch_typed_rows<T, kVec, 16, 1, kBackward>(a, b, out, rows, cols, stream);
    return launch_typed_rows<T, kVec, 32, 1, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 32 * kMax) {
    note("typed_warp", "rows a warp holds in registers: a warp a row, 2 or more packs a lane");
    // The 16-bit forward's warps of 6-8 packs a lane (72-92 registers) in blocks of one warp, so
    // that registers limit an SM's rows at whole warps, not blocks of four: at 6 and 7 packs an SM
    // holds 28 and 25 rows instead of 24 and 20. On the H200, bf16 4096x1649 went from 0.90 of
    // memcpy to 0.92, 4096x1746 0.90 to 0.92, 65536x1700 0.89 to 0.92; fp16 4096x1358 0.91 to
    // 0.93; bf16 4096x1358 stayed at 0.90. It lost a little at bf16 2048x1358 (0.89 -> 0.88)
    // and 1000x1358 (1.38 -> 1.35, in L2).
    return with_packs<2, kMax>(per(32), [&](auto p) {
      constexpr int P = decltype(p)::value;
      constexpr int kBlock = sizeof(T) == 2 && !kBackward && P >= 6 ? kWarpSize : 128;
      launch_typed_rows<T, kVec, 32, P, kBackward, kBlock>(a, b, out, rows, cols, stream);
    });
  }
  // 16-bit blocks hold their packs as words in the dtype (typed_words_kernel), up to 8 packs a
  // thread in each stream: blocks of 128 (backward), 256, 512, and 1024 in the forward (one an SM).
  // Measured on the H200, the forward's float32 copy (one conversion and one exponential an
  // element, against two exponentials from the words) stays ahead where registers do not limit the
  // rows an SM has in flight: in blocks of 128, and on rows that have an SM each.
  const bool alone = rows <= device_info().sms;
  const bool words = sizeof(T) == 2 && (kBackward || (!alone && packs > 128 * kMax));
  constexpr int kWords = 8;
  if constexpr (sizeof(T) == 2) {
    const int64_t single = (kBackward ? 512 : 1024) * kWords;
    if (words && packs <= single) {
      note("typed_block",
           "rows a block of 128-1024 threads holds in registers in their dtype: a block a row");
      if constexpr (kBackward) {  // the forward's words start past blocks of 128
        if (packs <= 128 * kWords) {
          return with_packs<kMax / 4 + 1, kWords>(per(128), [&](auto p) {
            launch_typed_words<T, 128, decltype(p)::value, kBackward>(a, b, out, rows, cols,
                                                                      stream);
          });
        }
      }
      if (packs <= 256 * kWords) {
        return with_packs<kWords / 2 + 1, kWords>(per(256), [&](auto p) {
          launch_typed_words<T, 256, decltype(p)::value, kBackward>(a, b, out, rows, cols, stream);
        });
      }
      if (packs <= 512 * kWords) {
        return with_packs<kWords / 2 + 1, kWords>(per(512), [&](auto p) {
          launch_typed_words<T, 512, decltype(p)::value, kBackward>(a, b, out, rows, cols, stream);
        });
      }
      if constexpr (!kBackward) {
        return with_packs<kWords / 2 + 1, kWords>(per(1024), [&](auto p) {
          launch_typed_words<T, 1024, decltype(p)::value, kBackward>(a, b, out, rows, cols, stream);
        });
      }
    }
  }
  if constexpr (sizeof(T) == 4 || !kBackward) {  // the 16-bit backward's blocks are all words
    if (!words && packs <= 256 * kMax) {
      note("typed_block", "rows a block of 128 or 256 threads holds in registers: a block a row");
      if (packs <= 128 * kMax) {
        return with_packs<kMax / 4 + 1, kMax>(per(128), [&](auto p) {
          launch_typed_rows<T, kVec, 128, decltype(p)::value, kBackward>(a, b, out, rows, cols,
                                                                         stream);
        });
      }
      return with_packs<kMax / 2 + 1, kMax>(per(256), [&](auto p) {
        launch_typed_rows<T, kVec, 256, decltype(p)::value, kBackward>(a, b, out, rows, cols,
                                                                       stream);
      });
    }
  }
  if constexpr (kBackward && sizeof(T) == 4) {
    // float32 backward: a block of 1024 threads with 4 packs of each stream a thread (one block an
    // SM, the whole 128 KB of both streams in flight) kept 0.91-1.0 of memcpy at 8K-16K floats,
    // where typed_smem fell to 0.74-0.86.
    if (packs <= 1024 * 4) {
      note("typed_block", "rows a block of 1024 threads holds in registers: a block a row");
      return launch_typed_rows<T, kVec, 1024, 4, kBackward>(a, b, out, rows, cols, stream);
    }
  }
  if constexpr (sizeof(T) == 2 || kBackward) {
    if (launch_typed_words_cluster<T, kBackward>(a, b, out, rows, cols, packs, stream)) return;
  }
  const TypedSmemPlan plan = plan_typed_smem<T, kVec, kBackward>(rows, cols);
  // Spread instead of typed_smem (where spread gives a row two blocks or more):
  // - few rows on clusters of 16 that leave SMs idle (fewer CTAs in all than SMs), where spread
  //   gives a row more blocks. On the H200 that took one row of 1M bf16 values forward from 0.27
  //   to 0.48 of memcpy, and 8 such rows from 0.34 to 0.58; on smaller clusters (100x20000 and
  //   60x30000 bf16 forward, one or two CTAs a row) spread was slower.
  // - the 16-bit forward on rows whose CTAs would be alone on their SMs (past 16 CTAs two an SM:
  //   more than about 900K values): one CTA an SM loads, then computes, then writes, with nothing
  //   to overlap (128x1048576 bf16: 0.385 of memcpy, tied with torch).
  const int parts = typed_spread_parts<T, kVec, kBackward>(rows, packs);
  const bool few_rows = plan.ctas == kTypedMaxCluster &&
                        int64_t(rows) * plan.ctas < device_info().sms && parts > plan.ctas;
  const bool forward_alone = !kBackward && sizeof(T) == 2 && plan.alone;
  const bool spread = plan.ctas > 0 && parts > 1 && (few_rows || forward_alone);
  if (plan.ctas > 0 && !spread) {
    note("typed_smem",
         "rows past a block's registers that up to 16 CTAs hold in shared memory: a cluster a "
         "row, the row in shared memory in its dtype");
    return launch_typed_smem<T, kVec, kBackward>(plan, a, b, out, rows, cols, stream);
  }
  if (parts > 1) {
    note("typed_spread",
         "few rows longer than 16 CTAs hold in shared memory, few rows on clusters of 16 that "
         "would leave SMs idle, or 16-bit forward rows past 16 CTAs two an SM: several blocks a "
         "row, partial results through global memory, the row read twice");
    return launch_typed_spread<T, kVec, kBackward>(a, b, out, rows, cols, parts, stream);
  }
  note("typed_two_pass",
       "rows longer than 16 CTAs hold in shared memory: a block a row, the row read twice");
  return launch_typed_two_pass<T, kVec, kBackward>(a, b, out, rows, cols, stream);
}

// One element an access (kVec = 1): a warp with two or four a lane up to 128, blocks of 128-1024
// threads holding 32 values a thread forward and 16 of each stream backward, then two passes.
template <typename T, bool kBackward>
void launch_typed_scalar(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  constexpr int kBlockPacks = typed_block_values(kBackward);
  const int64_t packs = cols;
  const char* kBlockWhy = "rows a block of 128-1024 threads holds in registers: a block a row";
  if (packs <= 32) {
    note("typed_group", "rows of at most 32 elements: a warp a row, one a lane");
    return launch_typed_rows<T, 1, 32, 1, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 128) {
    note("typed_warp", "rows of 33-128 elements: a warp a row, two or four a lane");
    if (packs <= 64)
      return launch_typed_rows<T, 1, 32, 2, kBackward>(a, b, out, rows, cols, stream);
    return launch_typed_rows<T, 1, 32, 4, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 128 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, 1, 128, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 256 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, 1, 256, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 512 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, 1, 512, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 1024 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, 1, 1024, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  note("typed_two_pass",
       "rows longer than a block of 1024 holds in registers: a block a row, the row read twice");
  return launch_typed_two_pass<T, 1, kBackward>(a, b, out, rows, cols, stream);
}

// Every pointer of the call shares its offset from a 16-byte boundary: 16-byte packs; otherwise
// one element an access.
template <typename T, bool kBackward>
void launch_typed(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  const auto ua = reinterpret_cast<uintptr_t>(a), ub = reinterpret_cast<uintptr_t>(b),
             uo = reinterpret_cast<uintptr_t>(out);
  const bool shared = (ua - uo) % 16 == 0 && (!kBackward || (ua - ub) % 16 == 0);
  if (shared) {
    return launch_typed_packed<T, 16 / int(sizeof(T)), kBackward>(a, b, out, rows, cols, stream);
  }
  launch_typed_scalar<T, kBackward>(a, b, out, rows, cols, stream);
  if (Plan* p = recording()) {
    p->why +=
        " (the pointers do not share their offset from a 16-byte boundary: one element an "
        "access)";
  }
}

}  // namespace fastsoftmax::detail
