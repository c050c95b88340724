// SPDX-License-Identifier: MIT
// fastsoftmax: the launch of a split (cudaLaunchKernelEx with a cluster dimension, or a
// cooperative grid), and what fits on the GPU at once.
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "check.h"
#include "launch.cuh"
#include "plan_record.h"
#include "split_internal.h"
#include "split_kernels.cuh"
#include "split_small.cuh"

namespace fastsoftmax::detail {

namespace {


// The kernels' attributes, set once per device and kernel: the stage may pass the 48 KB default,
// and the cluster kernels may form clusters of 9-16 CTAs.
template <typename Kernel>
void prepare(Kernel kernel, int packs, int threads, bool cluster) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> done;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.emplace(std::make_pair(device, reinterpret_cast<const void*>(kernel)), true).second)
    return;
  FS_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(stage_bytes(packs, threads))));
  // Clusters of 9-16 CTAs are not portable: a GPU that refuses them gets no cluster of that size
  // (groups_that_fit counts 0 and the plan falls back), not an error.
  if (cluster &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
    (void)cudaGetLastError();
}

// The launch configuration of a plan; `attr` must outlive it.
cudaLaunchConfig_t config(const SplitPlan& plan, cudaStream_t stream, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(plan.groups * plan.parts));
  cfg.blockDim = dim3(static_cast<unsigned>(plan.threads));
  // The small clusters (CTAs of 128 threads) hold their part in registers: no stage.
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

}  // namespace


// How many clusters or grid groups of plan.parts CTAs fit on the GPU at once. Cached.
int64_t groups_that_fit(const SplitPlan& plan) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, int>, int64_t> cache;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
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
        // A cluster size the GPU cannot form (9-16 refused) is an error here: none fit.
        if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
          (void)cudaGetLastError();
          clusters = 0;
        }
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

bool cluster_kernels_built() {
  // The cluster kernels exist only in code built for sm_90 or later; a build for older GPUs only
  // carries stubs, which the driver would JIT for a Hopper GPU from their sm_80 PTX.
  static std::mutex mutex;
  static std::map<int, bool> built;  // per device
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = built.find(device);
  if (found != built.end()) return found->second;
  cudaFuncAttributes attributes{};
  FS_CHECK(cudaFuncGetAttributes(&attributes, cluster_rows_kernel<8>));
  return built.emplace(device, attributes.ptxVersion >= 90).first->second;
}

void launch_split(const SplitPlan& plan, const float* x, float* y, int rows, int cols,
                  cudaStream_t stream) {
  if (recording()) {
    switch (plan.path) {
      case Split::kCluster:
        note("cluster", "a row longer than one block holds in registers, or few rows: a cluster "
                        "of K CTAs a row, each part in registers, the (max, sum) pairs exchanged "
                        "through distributed shared memory");
        break;
      case Split::kClusterHeld:
        note("cluster_held", "rows of 10-16 CTAs' worth over many rows, or few rows of 2-4 MiB: "
                             "a cluster a row, half of each part held in shared memory");
        break;
      case Split::kGrid:
        note("grid", "rows longer than a cluster holds, or few long rows: K CTAs of a cooperative "
                     "grid a row, the pairs exchanged through global memory");
        break;
      default:
        note("grid_held", "few rows, or rows past the grid's reach: the grid's parts, half of "
                          "each held in shared memory, one round of rows");
        break;
    }
    name_kernel(describe(plan));
    recorded(plan.groups * plan.parts, plan.threads);
    return;
  }
  // The exchange area of `grid` and `grid_held` is one per device: grid launches on different
  // streams must not run at the same time, so each waits for the one before it. One set of turns
  // for every kernel that uses the area, whatever its P (not one per instantiation below).
  static LaunchTurns grid_turns;
  static std::map<int, unsigned> tagged_launches;  // per device, counted under grid_turns' lock
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = config(plan, stream, &attr);
  with_split_packs(plan.packs, [&](auto p) {
    constexpr int P = decltype(p)::value;
    if (plan.path == Split::kClusterHeld) {
      const auto kernel = plan.threads == 1024 ? held_cluster_rows_kernel<P, 1024>
                                               : held_cluster_rows_kernel<P, kSplitThreads>;
      prepare(kernel, P, plan.threads, true);
      FS_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, plan.chunk));
      FS_CHECK_LAUNCH();
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
        FS_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, plan.chunk,
                                      static_cast<int>(plan.stage_groups), plan.stagger_ns));
      } else {
        prepare(cluster_rows_kernel<P>, P, plan.threads, true);
        FS_CHECK(cudaLaunchKernelEx(&cfg, cluster_rows_kernel<P>, x, y, rows, cols, plan.chunk));
      }
      FS_CHECK_LAUNCH();
      return;
    }
    grid_turns.take(stream, [&](int device) {
      const auto run = [&](auto kernel, auto ex) {
        prepare(kernel, P, plan.threads, false);
        FS_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, plan.parts, plan.chunk, ex));
        FS_CHECK_LAUNCH();
      };
      // The launch's parity picks TaggedExchange's set of words, and the launch clears the
      // other: one count for every kernel that uses them, whatever its P, CTA size or path.
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
    });
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

}  // namespace fastsoftmax::detail
