// SPDX-License-Identifier: MIT
// step08_cluster, host side of paths (g) and (h): which rows are split, over how many CTAs, and
// the launch (cudaLaunchKernelEx with a cluster dimension, or a cooperative grid).
#include "split.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/cuda_check.h"
#include "launch.cuh"
#include "split_rows.cuh"

namespace step08_cluster {
namespace {

// Clusters are in use unless use_clusters(false) or SOFTMAX_NO_CLUSTERS (set, not "0") says not:
// the environment variable shows step07's paths inside any program (tools/sanitize.sh uses it).
bool clusters_wanted_at_start() {
  const char* off = std::getenv("SOFTMAX_NO_CLUSTERS");
  return off == nullptr || std::string(off).empty() || std::string(off) == "0";
}
std::atomic<bool> g_clusters_on{clusters_wanted_at_start()};

constexpr int kSlotsPerCta = kSplitThreads * 8;  // the most a part holds: 8 float4 a thread
// Rows of 3 CTAs' worth that clusters of 3 would take in two rounds go to step07's path (d),
// one row a block, up to this size of the matrix (change 29).
constexpr int64_t kRowsInOneWaveBytes = int64_t(18) << 20;
// Rows per resident cluster from which (g) launches a cluster per two rows (make_split).
constexpr int64_t kRowsPerClusterForWaves = 8;
// The most rows a group of (h) takes with TaggedExchange (make_split).
constexpr int64_t kTaggedRounds = 4;
// Path (h) where at most this many groups fit at once: tagged pairs over any number of rows
// (change 42).
constexpr int64_t kTaggedGroups = 3;
// Rows of 2-4 MiB take (g) with held parts in CTAs of 1024 from this many rows, where at most
// kHeldWideGroups groups of (h) fit (plan_split, change 44).
constexpr int64_t kHeldWideRows = 96;
constexpr int64_t kHeldWideGroups = 6;
// Up to this many rows of at most 8 CTAs' worth take clusters wider than 8 (plan_split, change 47).
constexpr int64_t kWideClusterRows = 7;
// Rows of up to this many slots past 4096 take step07's path (d) over up to two waves of its
// blocks instead of clusters of 2 (plan_rows, change 51).
constexpr int64_t kShortPairSlots = 4750;
// Rows of 10-16 CTAs' worth of (g) in CTAs of 512 take (g) with held parts, in half as many CTAs,
// from this many rows (plan_rows, change 52).
constexpr int64_t kHeldClusterMinParts = 10;
constexpr int64_t kHeldClusterRows = 384;
// The most rows that change 50 spreads over every resident CTA with (i) (plan_split): the most
// measured.
constexpr int64_t kEveryCtaRows = 32;
// The most CTAs an SM the small clusters (CTAs of 128 threads) take a matrix at (plan_split).
constexpr int64_t kSmallCtasPerSm = 8;
// The small clusters' stages (make_split): about this many bytes of the matrix each, the next
// starting this share of their time at peak DRAM bandwidth after (change 27): the loads are
// issued about 1.7 times as fast as DRAM can serve them at its peak, so it never waits for work.
constexpr double kStageBytes = 1 << 20;
constexpr double kStageShare = 0.6;

// Calls f(std::integral_constant<int, P>) for the smallest P of 1, 2, 4, 8 with packs <= P.
template <typename F>
void with_split_packs(int packs, F&& f) {
  if (packs <= 1) return f(std::integral_constant<int, 1>{});
  if (packs <= 2) return f(std::integral_constant<int, 2>{});
  if (packs <= 4) return f(std::integral_constant<int, 4>{});
  f(std::integral_constant<int, 8>{});
}

// The stage: a part's slots, and 8 more for line_shift's offset (row_split.cuh).
size_t stage_bytes(int packs, int threads) {
  return (size_t(packs) * threads + 8) * sizeof(float4);
}

// The kernels' attributes, set once per device and kernel: the stage may pass the 48 KB default,
// and (g) may form clusters of 9-16 CTAs.
template <typename Kernel>
void prepare(Kernel kernel, int packs, int threads, bool cluster) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> done;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.emplace(std::make_pair(device, reinterpret_cast<const void*>(kernel)), true).second)
    return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(stage_bytes(packs, threads))));
  if (cluster)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

// The launch configuration of a plan; `attr` must outlive it.
cudaLaunchConfig_t config(const SplitPlan& plan, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(plan.groups * plan.parts));
  cfg.blockDim = dim3(static_cast<unsigned>(plan.threads));
  // (g) in CTAs of 128 threads holds its part in registers: no stage.
  const bool small = plan.path == Split::kCluster && plan.threads == kSmallSplitThreads;
  cfg.dynamicSmemBytes = small ? 0 : stage_bytes(plan.packs, plan.threads);
  cfg.stream = stream;
  if (plan.path == Split::kCluster || plan.path == Split::kClusterHeld) {
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = static_cast<unsigned>(plan.parts);
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
  } else {
    attr->id = cudaLaunchAttributeCooperative;  // every CTA resident: the spin barrier is safe
    attr->val.cooperative = 1;
  }
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// How many clusters (g) or groups (h) of plan.parts CTAs fit on the GPU at once. Cached.
int64_t groups_that_fit(const SplitPlan& plan) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, int>, int64_t> cache;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const auto key = std::make_tuple(device, int(plan.path), plan.parts, plan.packs, plan.threads);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = cache.find(key);
    if (found != cache.end()) return found->second;
  }
  int64_t fit = 0;
  with_split_packs(plan.packs, [&](auto p) {
    constexpr int P = decltype(p)::value;
    if (plan.path == Split::kCluster || plan.path == Split::kClusterHeld) {
      SplitPlan one = plan;
      one.groups = 1;
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg = config(one, 0, &attr);
      int clusters = 0;
      const auto count = [&](auto kernel) {
        prepare(kernel, P, plan.threads, true);
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
      };
      if (plan.path == Split::kClusterHeld && plan.threads == 1024) {
        count(held_cluster_rows_kernel<P, 1024>);
      } else if (plan.path == Split::kClusterHeld) {
        count(held_cluster_rows_kernel<P, kSplitThreads>);
      } else if (plan.threads == kSmallSplitThreads && plan.parts > kSmallNarrowParts) {
        count(small_cluster_rows_kernel<P, false, false, true>);  // the others take the same
      } else if (plan.threads == kSmallSplitThreads) {
        count(small_cluster_rows_kernel<P, false, false>);
      } else {
        count(cluster_rows_kernel<P>);
      }
      fit = clusters;
    } else {
      const auto resident = [&](auto kernel, int threads) {
        prepare(kernel, P, threads, false);
        return int64_t(device_info().sms) * blocks_per_sm(kernel, threads, stage_bytes(P, threads));
      };
      const int64_t ctas = plan.path == Split::kGrid
                               ? resident(grid_rows_kernel<P, GridExchange>, kSplitThreads)
                           : plan.threads == 1024   ? resident(held_rows_kernel<P, 1024>, 1024)
                                                    : resident(held_rows_kernel<P, kSplitThreads>,
                                                               kSplitThreads);
      fit = std::min<int64_t>(ctas, kMaxGridCtas) / plan.parts;
    }
  });
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, fit);
  return fit;
}

}  // namespace

bool clusters_usable() {
  if (!g_clusters_on.load()) return false;
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
}

void use_clusters(bool on) { g_clusters_on.store(on); }

std::string cluster_report() {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major < 9)
    return "thread block clusters: not on this GPU (" + arch +
           "; they need sm_90): every shape runs step07's paths";
  if (!g_clusters_on.load())
    return "thread block clusters: turned off (use_clusters or SOFTMAX_NO_CLUSTERS); step07's "
           "paths only";
  return "thread block clusters: available (" + arch +
         "): long rows and few rows are split over several SMs (paths g, h)";
}

SplitPlan make_split(Split path, int parts, int rows, int cols, int threads) {
  const auto refuse = [&](const std::string& why) {
    throw std::invalid_argument("step08_cluster: cannot split rows of " + std::to_string(cols) +
                                " floats over " + std::to_string(parts) + " CTAs: " + why);
  };
  if (path == Split::kNone) refuse("no split path given");
  if (parts < 2) refuse("a split needs at least 2 CTAs");
  const bool cluster = path == Split::kCluster || path == Split::kClusterHeld;
  const bool held = path == Split::kHeld || path == Split::kClusterHeld;
  if (cluster && parts > kMaxClusterCtas) refuse("a cluster holds at most 16");
  if (threads != kSplitThreads && !(threads == 1024 && held) &&
      !(threads == kSmallSplitThreads && path == Split::kCluster))
    refuse("CTAs of " + std::to_string(threads) +
           " threads (the sizes built: 512, 1024 for the held paths, 128 for clusters)");
  if (threads == kSmallSplitThreads && parts > kSmallMaxParts)
    refuse("clusters of CTAs of 128 threads hold at most " + std::to_string(kSmallMaxParts) +
           " (two warps' pairs a lane)");
  if (!clusters_usable()) refuse("thread block clusters are not in use on this device");
  SplitPlan plan;
  plan.path = path;
  plan.parts = parts;
  plan.threads = threads;
  const int64_t slots = cols / 4;
  plan.chunk = static_cast<int>((slots + parts - 1) / parts);
  const int per_thread = held ? 2 * threads : threads;
  const int packs = (plan.chunk + per_thread - 1) / per_thread;
  if (packs > 8)
    refuse(held ? "a part would need more than 16 float4 per thread"
                : "a part would need more than 8 float4 per thread");
  with_split_packs(std::max(packs, 1), [&](auto p) { plan.packs = decltype(p)::value; });
  const int64_t fit = groups_that_fit(plan);
  if (fit < 1) refuse("not even one group of them fits on the GPU at once");
  // Balanced: every cluster or group takes the same number of rows (or one fewer).
  const int64_t rounds = (rows + fit - 1) / fit;
  plan.groups = (rows + rounds - 1) / rounds;
  // (i)'s pairs always go as tagged words; (h)'s where a group takes at most four rows (and, since
  // change 42, wherever at most three groups fit; below). In the same rounds as the counter:
  // 8x1048576 (i) 0.82-0.83 of memcpy against 0.80, 4x1048576 (h, one
  // round) 0.76 against 0.71, 16x1048576 (four rounds) 0.84 against 0.82, 16x262147 0.93-0.95
  // against 0.88-0.90; at eight rounds and more level or behind: 32x1048576 0.83 both, 64x524288
  // 0.83-0.84 against 0.87, 256x524288 0.85 against 0.89 (docs/notes/step08.md, change 21).
  // Where at most three groups fit (rows of 67 CTAs' worth and more on an H100), (h)'s pairs go
  // as tagged words over any number of rows: 0.79-0.83 of memcpy against the counter's 0.73-0.77
  // at 10x1912074, 14x1700000 and 66x1912074 (two groups), 0.82 against 0.77 at 30x1300000 and
  // 0.79-0.80 against 0.76 at 64x1200001 (three), 0.74 against 0.70 at 100x1500000 (50 rows a
  // group); level at 100x1200000 and 128x2097152 (change 42). Where four groups fit they were
  // ahead at five and six rows a group and level at seven and eight (20x1000000 0.85-0.86 against
  // 0.84-0.85, 32x1048576 0.83 both); where seven or eight fit, behind from five (48x600000 0.82
  // against 0.84-0.85, 80x520000 0.83 against 0.87). Both keep four rows a group (the gain in four
  // groups is measured at two shapes only).
  plan.tagged = path == Split::kHeld ||
                (path == Split::kGrid && (rounds <= kTaggedRounds || fit <= kTaggedGroups));
  // Clusters over many rows (8 or more per resident cluster): two rows each, far more clusters
  // than fit at once, so that the hardware starts a new cluster wherever one ends. Clusters on
  // some SMs run faster than others; with a fixed share of the rows each, the slowest decides.
  // 0.983-0.988 of memcpy against 0.93-0.95 at every long-rows shape from 32768 to 131075
  // columns, 0.974 against 0.94 at 512x262147 (docs/notes/step08.md, change 8). A cluster has no
  // partner outside itself, so waiting for room is safe.
  if (path == Split::kCluster && rows >= kRowsPerClusterForWaves * fit)
    plan.groups = (rows + 1) / 2;
  // Clusters over 2-8 rounds whose last round would be at most half full: every cluster that fits,
  // the last round's few rows taken by some of them, instead of the balanced count, which leaves
  // up to half of them idle in every round (change 53). On an H200, fit against
  // balanced: 265x24869 17.3-17.5 us against 20.5-20.6 (clusters of 2, 132 against 89),
  // 400x24869 23.7 against 26.1, 240x38860 23.7 against 26.6-26.8 (of 3), 150x60715 21.5-21.7
  // against 22.9-23.0 (of 4), 50x90001 14.6-14.7 against 16.4-16.5 (of 6), 100x120001 26.9-27.1
  // against 29.3-29.4 (of 8), 48x262144 30.4 against 32.0-32.2 (of 16); 0-2% behind only one
  // row past one round of clusters of 8 and 16 (31x120001, 15x262144), shapes plan_rows gives
  // other paths. Past half full the balanced count was ahead by up to 7% at six shapes (100x60715,
  // 64x90001, 50x120001, 36x262144, 64x262144, 600x24869), else within 2.3% either way. Not yet
  // measured on an H100 (results/step08_change53_h200.txt).
  else if (path == Split::kCluster && threads == kSplitThreads && rows > fit &&
           2 * (rows - (rounds - 1) * fit) <= fit)
    plan.groups = fit;
  // (g) with held parts: a cluster per row. Its CTAs have no next row in flight; what keeps DRAM
  // busy while one cluster exchanges and stores is the other clusters, started as others end.
  if (path == Split::kClusterHeld) plan.groups = rows;
  // Small clusters, all resident: the rows start in stages of about kStageBytes of the matrix,
  // each stage kStageShare of its bytes' time at the GPU's peak DRAM bandwidth after the one
  // before. Loaded all at once, every row's last bytes land near the end of the whole matrix's,
  // and every row's exchange and stores come after that; in stages, the first rows are exchanged
  // and stored while the rest stream in. Change 24 started the clusters past one CTA an SM (at
  // most half) one part's time on every SM late: two stages. Stages of 1 MiB, 0.6 of their time
  // apart, measured 1.9% ahead of it on average over 20 shapes of 1-12.5 MiB, by up to 6%
  // (100x32768 0.94 of memcpy against 0.89, 96x16387, 64x32768), level at 16-24 rows of 16384 and
  // at 128x16384, 0.7% behind at 260x8192; stages 0.75 or 1.0 of their time apart, or of 0.75
  // or 1.5 MiB, did worse on average (docs/notes/step08.md, change 27).
  if (path == Split::kCluster && threads == kSmallSplitThreads && plan.groups <= fit) {
    const double row_bytes = double(cols) * sizeof(float);
    const int64_t stages =
        std::min<int64_t>(plan.groups, static_cast<int64_t>(rows * row_bytes / kStageBytes));
    if (stages >= 2) {
      plan.stage_groups = (plan.groups + stages - 1) / stages;
      plan.stagger_ns = static_cast<unsigned>(kStageShare * double(plan.stage_groups) * row_bytes /
                                              device_info().peak_bytes_per_ns);
    }
  }
  return plan;
}

// The choices, each measured on the H100 (docs/notes/step08.md, experiments 1 and 2, changes 3
// to 5):
//  - rows of up to 16K floats stay on step07's paths: split over 2-4 CTAs of 512, 32x16384 and
//    128x4096 ran at 0.45-0.73 of memcpy against path (c)'s 0.70-0.72 and 0.88-0.89; except, on
//    a matrix of rows of 8K-32K floats that fit in one round, clusters of CTAs of 128 threads
//    (changes 18 and 24);
//  - longer rows: a cluster of K = 2..16 CTAs (8 float4 a thread) when there are rows for at
//    least one round of clusters: 2048x65536 0.95, 512x262144 (K = 16) 0.95 against a grid
//    group's 0.91, 64x262144 0.91 against 0.86 (synccheck reports "Missing wait" on clusters of 12
//    and 16, and on tools/mbarrier_probe.cu's minimal kernel in clusters of 16 too). That includes the rows
//    step07's path (d) holds in one SM's shared memory: clusters of 2 were ahead of (d) by
//    0.003-0.012 of memcpy at 4096x32768, 4096x32771 and 4000x20003, and tied at 4096x24579;
//  - few rows of at most 8 CTAs' worth: clusters of K = 2..8, as wide as spreads the rows over
//    the resident CTAs (16x65536: clusters of 8 0.67 against a grid group of 8's 0.62; 33x20001:
//    clusters of 3 1.07-1.12 against 0.83-0.92; 128x20000: clusters of 2 0.75-0.76 against
//    0.70-0.72), but no wider than takes every row in one round of clusters (change 17); 16 on
//    at most seven rows (change 47);
//  - rows just past one round of clusters of the fewest CTAs that hold a row, where a grid group
//    of as many CTAs takes them in one round: path (h); where none does, rows of 2 CTAs' worth
//    that clusters of 2 would take in two rounds, where two blocks of step07's path (d) fit an SM
//    (up to 7208 slots on an H100): (d) (changes 17, 46 and 48); rows of 5-16 CTAs' worth that
//    clusters would take in three rounds or more, where (i) in the fewest CTAs that hold a row
//    takes every row in one: (i) (change 45);
//  - the rest, path (h): K as large as spreads the rows over every resident CTA, but at least 4
//    float4 a thread (1x1048576: K = 128 at 0.52 of memcpy, 264 CTAs of 2 float4 at 0.32;
//    8x262144: K = 32 0.65-0.66 against clusters of 16's 0.57); on few rows of a small matrix
//    one CTA an SM in parts of 1-2 float4 a thread (change 47); at most 128 CTAs a row, else
//    (i) where that needs at most 128 (change 49);
//  - but many rows of up to 4 MiB where (h) would exchange behind its counter: (g) with held
//    parts, a cluster per row (change 44, below);
//  - except where (h) would take two or more rounds of rows and (i) one: (i) in groups of the
//    fewest CTAs that hold a row (8x1048576: K = 32 or 33 0.74-0.76 against (h)'s groups of 64 in
//    two rounds 0.72-0.73; 12x700001: 0.88 against 0.85), or of as many as are resident where
//    that is a tenth more or better (change 12: 6x1048576 K = 44 0.73 against K = 32's 0.69,
//    5x1048576 K = 52 0.70 against 0.64, 6x1000003 0.87 against 0.80; K = 33 at 8x1048576 and
//    66 at 4x2097152 were 0.005-0.008 behind 32 and 64);
//  - and rows longer than (h) holds at all: (i) in the fewest CTAs of 1024 threads that hold a row
//    (1x4400003: K = 68 0.71; in CTAs of 512, K = 135 0.62 and K = 264 0.55-0.59; step07's path
//    (e) took 0.02).
// plan_split's choice before change 50 (below).
static SplitPlan plan_rows(int rows, int cols) {
  if (!clusters_usable()) return {};
  const int64_t slots = cols / 4;
  // Rows of 2048-8192 slots (8K-32K floats) that fit in one round: clusters of CTAs of 128
  // threads, one row each, every warp's pair exchanged (change 24). First taken on small matrices
  // of few rows at most two CTAs an SM (change 18: 32x16384 0.80 of memcpy against path c's
  // 0.70, 1x16384 0.77 against 0.64, 8x32768 0.75 against 0.65 in clusters of 512). With the
  // warps' pairs exchanged and the late clusters staggered, they were ahead of step07 at every
  // shape measured where every row fits in one round, up to 8 CTAs an SM: 64x16384 0.86-0.89 against 0.77-0.81,
  // 128x16384 0.92-0.93 against 0.82 (clusters of 7), 260x8192 0.93-0.94 against 0.91 (of 3),
  // 170x12000 1.29-1.32 against 1.14-1.15, 64x32768 0.88-0.90 against 0.67-0.70, 16x8192
  // 0.82-0.83 against 0.75-0.76. Below 2048 slots they went both ways (64x5000 1.30-1.35 against
  // 1.34-1.40, 77x7001 1.35 against 1.37, 176x6000 1.28-1.34 against 1.22-1.30): not taken
  // (docs/notes/step08.md, change 24; results/step08_change24_h100.txt).
  //   Rows of 8193-16384 slots (32K-64K floats) take clusters of 9-16 such CTAs where every row
  // fits in one round (change 28), where they had clusters of 3-8 CTAs of 512 threads or grid
  // groups. Ratios to memcpy, three rounds against the plans before it on one H100: 95x36005
  // 1.12-1.16 against 0.80-0.81 (step07's path d 0.86-0.88), 32x65536 0.88-0.90 against 0.70,
  // 16x65536 0.82-0.83 against 0.66, 64x49152 0.92-0.93 against 0.72-0.73, 48x40000 0.91 against
  // 0.71-0.72, 1x65536 0.76-0.79 against 0.62-0.64; ahead at all 14 shapes whose plan it changes
  // (results/step08_change28_h100.txt). At 32x16384 clusters of 16 were no faster than 8
  // (results/step08_32x16384_k_h100.txt), so rows of up to 8192 slots keep at most 8.
  if (slots >= 2048 && slots <= int64_t(kSmallMaxParts) * 1024) {
    // The widest clusters, from at most 4 float4 a thread down to 8, that take every row in one
    // round at no more than kSmallCtasPerSm CTAs an SM: of at most 8 CTAs up to 8192 slots (the
    // rule measured there), of 9-16 past that.
    const int64_t widest = slots <= int64_t(kSmallNarrowParts) * 1024 ? kSmallNarrowParts
                                                                      : kSmallMaxParts;
    for (int64_t k = std::min<int64_t>(widest, (slots + 511) / 512); k >= (slots + 1023) / 1024;
         --k) {
      if (rows * k > kSmallCtasPerSm * device_info().sms) continue;
      const SplitPlan small =
          make_split(Split::kCluster, static_cast<int>(k), rows, cols, kSmallSplitThreads);
      if (small.groups >= rows) return small;
    }
  }
  if (slots <= 4096) return {};
  const int64_t sms = device_info().sms;
  const int64_t ctas = sms * 2;  // 512-thread CTAs resident at once
  const int64_t need = std::max<int64_t>(2, (slots + kSlotsPerCta - 1) / kSlotsPerCta);
  // As many CTAs a row as spread the rows over the resident CTAs, in parts of at least 2048 slots;
  // or, where that is wider and the parts come to at most 1024 slots (two float4 a thread), one
  // CTA an SM in parts of at least 512, at most as many as read their pairs in one round trip
  // (change 47, runs 3-5: 1x151936 6.7-6.9 us in 75 parts of (h) against 7.3-7.4 in 19,
  // 1x256000 6.9-7.1 in 125 against 7.5-7.7 in 32, 2x262144 7.5-7.6 in 66 against 7.9-8.0 in 32, 1x300001 7.1-7.3
  // in 128 against 7.7 in 37; 1x1048576 in 132 parts, two round trips, 9.5-9.8 us against 8.9-9.1
  // in 128, 1x300001 and 1x524288 in 132 0-4% behind 37 and 64; 3x200000 and 4x151936 in parts
  // of 1137 and 1151 within 2% of 25 and 19; results/step08_change47_h100.txt).
  const int64_t spread = std::min({sms / rows, (slots + 511) / 512, int64_t(kTaggedBatchParts)});
  const bool spread_fits = spread > 0 && (slots + spread - 1) / spread <= 1024;
  // Either way at most 128 (change 49: 1x1100000 9.1 us in 128 parts against 10.1-10.2 in 135,
  // 1x1500000 10.0 against 10.9-11.0 in 184, 1x2000000 11.2-11.3 against 11.7-11.8 in 245,
  // 2x1500000 13.4-13.6 against 13.9-14.1 in 132; results/step08_change49_h100.txt).
  const int64_t wide = std::min<int64_t>(
      kTaggedBatchParts,
      std::max(std::min(ctas / rows, (slots + 2047) / 2048), spread_fits ? spread : 0));
  // (i) holds twice (h)'s part per CTA, half of it in the stage, without the next row in flight;
  // in CTAs of 1024 threads, twice that again.
  const int64_t need_held = (slots + 2 * kSlotsPerCta - 1) / (2 * kSlotsPerCta);
  const int64_t need_wide = (slots + 4 * kSlotsPerCta - 1) / (4 * kSlotsPerCta);
  if (need <= kMaxClusterCtas) {
    const SplitPlan c = make_split(Split::kCluster, static_cast<int>(need), rows, cols);
    const int64_t fit = groups_that_fit(c);
    if (rows > fit) {
      // Clusters take two rounds or more. Where a grid group of the same K takes every row in one
      // round, it wins: clusters fit fewer CTAs than the SMs hold (one GPC each), so these bands
      // exist just past each cluster size's fit (63x50001: grid 0.89-0.90 of memcpy against
      // clusters of 4 in two rounds 0.79-0.82; 16x262147 0.88-0.90 against 0.74-0.75). With two
      // rounds either way, clusters stay ahead (24x262144: 0.78 against 0.66-0.67). Change 17 in
      // docs/notes/step08.md.
      const SplitPlan h = make_split(Split::kGrid, static_cast<int>(need), rows, cols);
      if (h.groups >= rows) return h;
      // Clusters of 2 in two rounds, which balanced take two rows each, against step07's path
      // (d), a block per row and the SMs as they come free: (d) 0.87-1.03 of memcpy against
      // 0.77-0.98 at 133x20001, 140x20001, 220x16500 and 264x20001, level at 180x28001; at
      // 300x20001, three rounds of clusters, (d) was behind (0.84 against 0.89). Clusters of 3
      // and 4 went both ways against (d) (0.03-0.06 behind at 95-120x36005, 0.14 ahead at
      // 100x50001; change 17). Clusters of 3 in two rounds, where (d) takes every row in one
      // wave (at most a row an SM), were behind it on matrices of up to about 18 MiB (step07's
      // time over theirs 0.94-0.97 at 89x48000, 110x38000, 117x36005 and 130x32800; 100x40000
      // 0.97-1.00, 125x33000 0.91-0.92), level at 105x44444, (d) 1-2% ahead of them at
      // 132x36005 (19 MB), and behind past that (120x45001 and 128x49152, 4%): (d) up to 18 MiB
      // (change 29; three rounds each, results/step08_tworound_h100.txt,
      // step08_change29_first_h100.txt). Clusters of 4 keep their rounds past the rows that (i)
      // in 3 takes in one (100x65536: 1.17; change 30 below).
      // Rows too long for two blocks of (d) an SM keep the clusters of 2 (changes 46 and 48; on an
      // H100 past 7208 slots, 28832 floats): 256x32000 0.89-0.90 of memcpy against (d)'s
      // 0.75, 256x30001 1.05-1.07 against 0.89, 256x29200 0.90 against 0.76-0.77, 220x29000
      // 0.96-0.99 against 0.88; (d), two blocks an SM, ahead or level below (240x24000 0.86-0.87
      // against 0.84, 160x28000 0.74 against 0.71, 256x28800 level;
      // results/step08_change46_h100.txt, step08_change48_h100.txt).
      if (need == 2 && rows <= 2 * fit && slots <= device_info().pair_slots) return {};
      // Rows just past one CTA's 4096 slots, up to 4750 (19003 floats), keep (d) over twice as
      // many rows, up to two waves of its blocks (change 51: 300-436 rows of 16388-19000 floats,
      // step07's time over the clusters' 0.875-0.94; at 600 rows 0.94-1.03, at 800 1.00-1.05, at
      // 2000 1.06-1.12; clusters of 3 and 4 slower than those of 2 up to 600 rows;
      // results/step08_change51_h100.txt).
      if (need == 2 && rows <= 4 * fit && slots <= kShortPairSlots) return {};
      if (need == 3 && rows <= sms && slots <= device_info().cache_slots &&
          rows * slots * 16 <= kRowsInOneWaveBytes)
        return {};
      // Rows of 4 CTAs' worth past one round of clusters of 4 and of grid groups of 4 (67-88
      // rows on an H100): path (i) in 3 CTAs a row takes every row in one round. Three rounds
      // each on an H100 (results/step08_held3_band_h100.txt, change 30): 1.03-1.06 of step07's
      // speed at 67x65536, 70x60000 and 72x63000 where the clusters were 0.93-0.96, 5-10% ahead
      // of them at 75x57000 and 80x65536, level at 85x50001 and 88x52000.
      if (need == 4 && rows * 3 <= ctas) return make_split(Split::kHeld, 3, rows, cols);
      // Rows of 5-16 CTAs' worth that clusters would take in three rounds or more, where (i) in
      // the fewest CTAs that hold a row takes every row in one (change 45): 33x262144 0.85-0.86
      // of memcpy against clusters of 16 over three rounds 0.74, 32x200000 0.76-0.77 against
      // 0.69, 48x151936 0.80 against 0.73, 40x180001 0.93 against 0.88, 64x128256 0.84 against
      // 0.82. Over two rounds the clusters stay (50x128256: 0.98 against (i)'s 0.90; 24x256000
      // level).
      if (need >= 5 && rows > 2 * fit && rows * need_held <= ctas)
        return make_split(Split::kHeld, static_cast<int>(need_held), rows, cols);
      // Many rows of 10-16 CTAs' worth: (g) with held parts, a cluster per row, in half as many
      // CTAs (change 52). Fewer of the SMs' 264 CTAs of 512 are busy in wide clusters (on an H100
      // or H200, 14 clusters of 16 fit at once, 224 CTAs; 16 of 12, 192; 30 of 8, 240): a reading
      // of the fit, not measured as the cause. On an H200, time of (g) over the held parts' at
      // 384-2048 rows: 1.02-1.03 at 160000 floats (10 CTAs), 1.08-1.09 at 180000-180003 (11),
      // 1.04-1.08 at 190000-220000 (12-14), 1.00-1.04 at 230000-250000 (15-16), 1.02-1.04 at
      // 262144 and 262147 (16); below 384 rows both ways (0.93 at 96x230000, 1.06-1.09 at
      // 64x180000); clusters of 9 ahead of the held parts below 768 rows (0.94-1.00). On an H100,
      // change 44 measured 512x262144 at 0.980 of memcpy this way against 0.973-0.975
      // (results/step08_change52_h200.txt, step08_change44_h100.txt).
      if (need >= kHeldClusterMinParts && rows >= kHeldClusterRows)
        return make_split(Split::kClusterHeld, static_cast<int>(need_held), rows, cols);
      return c;
    }
    if (rows == fit) return c;
    if (need <= 8) {
      // Few rows: clusters as wide as spreads the rows over the resident CTAs, but never so wide
      // that fewer clusters fit than there are rows (40x60001: clusters of 6 in two rounds
      // 0.75-0.76 of memcpy, of 5 in one 0.90-0.92; change 17). Up to 8 CTAs; 16 on at most
      // kWideClusterRows rows (change 47: 1x128256 6.4-6.6 us in clusters of 16 against 7.2-7.3
      // in 8, 4x80000 6.4 against 6.9-7.0, 7x80000 6.8-7.1 against 7.3-7.5; at 8 rows of 100000
      // and 128256 floats clusters of 13 and 16 were 6-11% behind those of 8; on an H100 7
      // clusters of 16 fit one CTA an SM).
      const int64_t widest = rows <= kWideClusterRows ? int64_t(kMaxClusterCtas)
                                                      : std::min<int64_t>(8, std::max(need, wide));
      for (int64_t k = widest; k > need; --k) {
        const SplitPlan wider = make_split(Split::kCluster, static_cast<int>(k), rows, cols);
        if (wider.groups >= rows) return wider;
      }
      return c;
    }
  }
  if (need <= ctas) {
    const SplitPlan h =
        make_split(Split::kGrid, static_cast<int>(std::max(need, wide)), rows, cols);
    const bool one_round = rows <= groups_that_fit(h);
    // Many rows, where (h) would exchange behind its counter (more than four rows a group, more
    // than three groups) and (i) would take two rounds or more: (g) with held parts, a cluster
    // per row (change 44). Rows of up to 2 MiB in the fewest CTAs of 512 that hold one: 0.96-0.98
    // of memcpy against (h)'s 0.85-0.89 at 256x524288, 256x524291, 512x524288, 600x300000,
    // 300x400001 and 1000x270000, 0.90 against 0.87 at 64x524288 and 80x520000, level at
    // 40x524288 and 44x400001 (where (h) takes five rows a group). Rows of 2-4 MiB in clusters of
    // 16 CTAs of 1024, one an SM (the fewest, 9-15, fit fewer clusters: 200x700001 0.86 in 11,
    // 0.90 in 16), where at most six groups of (h) fit and on at least 96 rows: 0.86-0.91 against
    // 0.82-0.86 from 96 to 256 rows of 700001-1048579 floats (0.89 against 0.85 at 128x1048576);
    // behind (h) by 2-4% on 48-64 rows, and at 128-256 rows of 600000 floats, where seven groups
    // of (h) fit (results/step08_change44_h100.txt).
    if (!one_round && !h.tagged && rows * need_held > ctas) {
      if (need_held <= kMaxClusterCtas)
        return make_split(Split::kClusterHeld, static_cast<int>(need_held), rows, cols);
      if (need_wide <= kMaxClusterCtas && rows >= kHeldWideRows &&
          groups_that_fit(h) <= kHeldWideGroups)
        return make_split(Split::kClusterHeld, kMaxClusterCtas, rows, cols, 1024);
    }
    // (h) in one round, or more rounds than (i) would take in one. But where (h) needs more than
    // 128 CTAs a row (two round trips of the tagged exchange) and (i) at most 128, (i) (change 49:
    // 1x3000000 13.7-13.8 us in 128 parts of (i) against 14.7 in 184 of (h) and 14.5 in 264,
    // 1x2200000 12.3-12.4 against 13.3-13.4 in 135 of (h)).
    const bool one_trip = h.parts <= kTaggedBatchParts || need_held > kTaggedBatchParts;
    if ((one_round && one_trip) || rows * need_held > ctas) return h;
    // As many CTAs a row as are resident, up to 128, where that is at least a tenth more than the
    // fewest (change 49: 2x2200000 17.6-17.7 us in 128 against 18.1-18.2 in 132).
    const int64_t wide_held = std::min<int64_t>(kTaggedBatchParts, ctas / rows);
    const int64_t parts = wide_held * 10 >= need_held * 11 ? wide_held : need_held;
    return make_split(Split::kHeld, static_cast<int>(parts), rows, cols);
  }
  // A row longer than (h) holds on the whole GPU: in CTAs of 512, (i) would put two parts of the
  // row on some SMs. CTAs of 1024 threads, one an SM, each holding twice as much: 1x4400003 in 68
  // of them at 0.71 of memcpy against 135 of 512 at 0.62 (132 of 1024: 0.65), 3x5000001 0.65
  // against 0.59 (docs/notes/step08.md, change 9).
  if (need_wide > sms)
    return {};  // longer than the whole GPU holds, the stage included: read twice (path e)
  return make_split(Split::kHeld, static_cast<int>(need_wide), rows, cols, 1024);
}

SplitPlan plan_split(int rows, int cols) {
  const SplitPlan plan = plan_rows(rows, cols);
  // Change 50: 8-32 rows of 16K-64K slots (64K-256K floats), where (g) in CTAs of 512, (h) or (i)
  // would take fewer CTAs a row or more than one round: (i) over every resident CTA, two an SM,
  // in parts of more than 1024 slots (two float4 a thread and more). A cluster of (g) has one CTA
  // an SM and loads its part through the stage; in (i) half of each part goes straight into
  // registers, and an SM holds parts of two rows. Measured against the plan before, two processes
  // (results/step08_change50_h100.txt): 16x100000 9.5 us against 10.7, 16x128256 10.4-10.7
  // against 11.8, 20x100000 10.2 against 11.4, 20x256000 17.9-18.1 against 19.4, 24x128256 13.1
  // against 13.9, 32x151936 17.6-17.7 against 18.7-18.8, 8x151936 8.9-9.0 against 10.0-10.1,
  // 10x151936 9.4-9.5 against 10.4; level at 12x100000 and 24x151936; behind where the parts
  // come to 1024 slots or fewer (8x100000, 8x128256: 2-5%; 10x100000 1.5-2%), and against (h)
  // of as many CTAs (16x151936, 10x256000: 1-2%), which keep their plans. Past 32 rows both ways
  // (36x128256 10% ahead, 56x128256 12% behind).
  if (rows <= kWideClusterRows || rows > kEveryCtaRows || plan.threads != kSplitThreads ||
      (plan.path != Split::kCluster && plan.path != Split::kGrid && plan.path != Split::kHeld))
    return plan;
  const int64_t slots = cols / 4;
  const int64_t every = std::min<int64_t>(kTaggedBatchParts, 2 * device_info().sms / rows);
  const int64_t part = (slots + every - 1) / every;
  if (slots > int64_t(kMaxClusterCtas) * kSlotsPerCta || part <= 1024 || part > 2 * kSlotsPerCta)
    return plan;
  if (every <= plan.parts && plan.groups >= rows) return plan;
  return make_split(Split::kHeld, static_cast<int>(every), rows, cols);
}

void launch_split(const SplitPlan& plan, const float* x, float* y, int rows, int cols,
                  cudaStream_t stream) {
  static std::map<int, unsigned> tagged_launches;  // per device, under the mutex below
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = config(plan, stream, &attr);
  with_split_packs(plan.packs, [&](auto p) {
    constexpr int P = decltype(p)::value;
    if (plan.path == Split::kClusterHeld) {
      const auto kernel = plan.threads == 1024 ? held_cluster_rows_kernel<P, 1024>
                                               : held_cluster_rows_kernel<P, kSplitThreads>;
      prepare(kernel, P, plan.threads, true);
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, plan.chunk));
      CUDA_CHECK_LAUNCH();
      return;
    }
    if (plan.path == Split::kCluster) {
      if (plan.threads == kSmallSplitThreads) {
        const auto ux = reinterpret_cast<uintptr_t>(x), uy = reinterpret_cast<uintptr_t>(y);
        const bool aligned = ux % 16 == 0 && uy % 16 == 0 && cols % 4 == 0;
        const bool exact = aligned && plan.chunk == P * kSmallSplitThreads &&
                           int64_t(plan.parts) * plan.chunk == cols / 4;
        const bool wide = plan.parts > kSmallNarrowParts;
        const auto kernel = wide ? (exact     ? small_cluster_rows_kernel<P, true, true, true>
                                    : aligned ? small_cluster_rows_kernel<P, true, false, true>
                                              : small_cluster_rows_kernel<P, false, false, true>)
                            : exact   ? small_cluster_rows_kernel<P, true, true>
                            : aligned ? small_cluster_rows_kernel<P, true, false>
                                      : small_cluster_rows_kernel<P, false, false>;
        prepare(kernel, P, plan.threads, true);
        CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, plan.chunk,
                                      static_cast<int>(plan.stage_groups), plan.stagger_ns));
      } else {
        prepare(cluster_rows_kernel<P>, P, plan.threads, true);
        CUDA_CHECK(cudaLaunchKernelEx(&cfg, cluster_rows_kernel<P>, x, y, rows, cols, plan.chunk));
      }
      CUDA_CHECK_LAUNCH();
      return;
    }
    // The exchange area of (h) and (i) is one per device: grid launches on different streams
    // must not run at the same time, so each waits for the one before it.
    static std::mutex mutex;
    static std::map<int, cudaEvent_t> last;
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(mutex);
    cudaEvent_t& done = last[device];
    if (done == nullptr) {
      CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    } else {
      CUDA_CHECK(cudaStreamWaitEvent(stream, done, 0));
    }
    const auto run = [&](auto kernel, auto ex) {
      prepare(kernel, P, plan.threads, false);
      CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, plan.parts, plan.chunk, ex));
      CUDA_CHECK_LAUNCH();
    };
    // The launch's parity picks TaggedExchange's set of words, and the launch clears the other:
    // one count for every kernel that uses them, whatever its P, CTA size or path.
    const TaggedExchange tagged{plan.tagged ? tagged_launches[device]++ & 1u : 0u};
    if (plan.path == Split::kGrid && plan.tagged) {
      run(grid_rows_kernel<P, TaggedExchange>, tagged);
    } else if (plan.path == Split::kGrid) {
      run(grid_rows_kernel<P, GridExchange>, GridExchange{});
    } else if (plan.threads == 1024) {
      run(held_rows_kernel<P, 1024>, tagged);
    } else {
      run(held_rows_kernel<P, kSplitThreads>, tagged);
    }
    CUDA_CHECK(cudaEventRecord(done, stream));
  });
}

std::string cluster_fit_report() {
  if (!clusters_usable()) return "none: " + cluster_report();
  std::string out;
  for (int k : {2, 3, 4, 6, 8, 12, 16}) {
    SplitPlan plan;
    plan.path = Split::kCluster;
    plan.parts = k;
    plan.packs = 8;
    out += (out.empty() ? "" : " ") + std::to_string(k) + ":" +
           std::to_string(groups_that_fit(plan));
  }
  return out;
}

std::string describe(const SplitPlan& plan) {
  if (plan.path == Split::kNone) return "not split";
  const char* name = plan.path == Split::kCluster       ? "cluster"
                     : plan.path == Split::kGrid        ? "grid"
                     : plan.path == Split::kClusterHeld ? "cluster-held"
                                                        : "held";
  return std::string(name) + " K=" + std::to_string(plan.parts) +
         " P=" + std::to_string(plan.packs) + " groups=" + std::to_string(plan.groups) +
         (plan.threads == kSplitThreads ? "" : " T=" + std::to_string(plan.threads)) +
         (plan.path == Split::kGrid && plan.tagged ? " tagged" : "") +
         (plan.stagger_ns != 0
              ? " stagger=" +
                    std::to_string((plan.groups + plan.stage_groups - 1) / plan.stage_groups) +
                    "x" + std::to_string(plan.stagger_ns) + "ns"
              : "");
}

}  // namespace step08_cluster
