// SPDX-License-Identifier: MIT
// cluster_probe: how fast a row split across a Hopper thread block cluster runs, before it is a
// step. Groundwork for step08_cluster (rows longer than one SM holds, and few long rows).
//
// The kernel: a cluster of C CTAs (2..16) owns one row. CTA r holds a contiguous chunk of the
// row's float4 slots in registers (512 threads x kPacks float4), so the row is read from DRAM
// once. Each CTA reduces its chunk's max (shuffles, one value per warp through shared memory),
// publishes it in its shared memory, and after cluster.sync() warp 0 of every CTA reads all C
// maxima through distributed shared memory (cluster.map_shared_rank). The same for the sum of
// exponentials. Then each CTA normalises and writes its chunk: one read and one write per element,
// 8 bytes, like step07's register paths, for rows of up to 16 x 512 x 8 x 4 = 262,144 floats.
// A last cluster.sync() at exit keeps each CTA's shared memory alive until the others have read it.
//
// Limits of this probe (what step08 must add): rows must start on 16-byte boundaries (x aligned,
// N % 4 == 0; other shapes are refused), no rows longer than the cluster holds, kPacks fixed per
// run (--packs).
//
//   build/softmax_cluster_probe [--packs 2|4|8] [--persistent | --next] [--iters K] [ROWSxCOLS ...]
//
// --persistent: as many clusters as fit at once (cudaOccupancyMaxActiveClusters), each looping
// over rows; --next: the same, with the next row's loads issued before this row is reduced
// (--packs 4 only: twice the registers).
//
// Default shapes: the issue's long-rows sweep (M*N = 2^27, N = 2^14 ... 2^18) and few-rows set
// (64x262144, 32x16384, 128x4096). For each shape: verification against the double-precision
// reference (check_step), then the median time of K launches with L2 flushed, a memcpy of the same
// bytes and step07_persistent timed interleaved with it (the ratio to memcpy, and step07's time
// over the probe's: > 1 when the probe is faster). Exit codes: 0 ok, 1 a verification or CUDA
// failure, 2 bad usage, 77 no GPU or no cluster support.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/data.h"
#include "common/device.h"
#include "common/program.h"
#include "common/softmax.h"
#include "common/step_table.h"
#include "common/timer.h"
#include "common/verify.h"

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxCluster = 16;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// The block's max or sum into `out` (shared), visible to the block after the barrier inside.
template <bool kMax>
__device__ __forceinline__ void block_reduce_to(float v, float* warp_part, float* out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarps ? warp_part[lane] : (kMax ? -INFINITY : 0.f);
    w = kMax ? warp_max(w) : warp_sum(w);
    if (lane == 0) *out = w;
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The cluster's max or sum of the CTAs' `part` (one float in each CTA's shared memory), read by
// warp 0 through distributed shared memory; left in `out` (shared) for the whole block.
template <bool kMax>
__device__ __forceinline__ void cluster_reduce_to(cg::cluster_group& cluster, float* part,
                                                  float* out) {
  const int lane = threadIdx.x % 32;
  if (threadIdx.x < 32) {
    float v = kMax ? -INFINITY : 0.f;
    if (lane < static_cast<int>(cluster.num_blocks())) v = *cluster.map_shared_rank(part, lane);
    v = kMax ? warp_max(v) : warp_sum(v);
    if (lane == 0) *out = v;
  }
  __syncthreads();
}
#endif

// Loads this CTA's chunk of row `row` (-inf past the row's end, or for a row past the last).
template <int kPacks>
__device__ __forceinline__ void load_chunk(const float* x, int64_t row, int rows, int cols,
                                           int first, int slots, float (&v)[kPacks][4]) {
  const float4* in = reinterpret_cast<const float4*>(x + row * cols) + first;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int s = threadIdx.x + k * kThreads;
    if (row < rows && s < slots) {
      const float4 t = in[s];
      v[k][0] = t.x, v[k][1] = t.y, v[k][2] = t.z, v[k][3] = t.w;
    } else {
      v[k][0] = v[k][1] = v[k][2] = v[k][3] = -INFINITY;
    }
  }
}

// A cluster per row; a grid of fewer clusters than rows loops (cluster c takes rows c, c + the
// number of clusters, ...). kNext: the next row's chunk is loaded before this one is reduced.
// Two cluster barriers per row: every CTA's cta_max is written before any is read (the first),
// and every cta_max read before any CTA goes on to write its cta_sum (the second); a CTA reaches
// the next row's first barrier only after reading this row's sums, so neither value is
// overwritten while another CTA may read it. A last barrier keeps shared memory alive to the end.
template <int kPacks, bool kNext>
__global__ void __launch_bounds__(kThreads, 1)
    cluster_row_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                       int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // built for every architecture; clusters exist from sm_90 on (main() checks first)
#else
  __shared__ float warp_max_part[kWarps], warp_sum_part[kWarps];
  __shared__ float cta_max, cta_sum, row_max, row_sum;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t clusters = gridDim.x / cluster.num_blocks();
  const int first = rank * chunk;                  // this CTA's first slot of each row
  const int slots = min(chunk, cols / 4 - first);  // may be <= 0 for the last CTAs
  int64_t row = blockIdx.x / cluster.num_blocks();

  float v[kPacks][4];
  load_chunk(x, row, rows, cols, first, slots, v);
  for (; row < rows; row += clusters) {
    float next[kNext ? kPacks : 1][4];
    if constexpr (kNext) load_chunk(x, row + clusters, rows, cols, first, slots, next);
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) m = fmaxf(m, v[k][j]);
    block_reduce_to<true>(m, warp_max_part, &cta_max);
    cluster.sync();
    cluster_reduce_to<true>(cluster, &cta_max, &row_max);
    const float max_val = row_max;
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[k][j] = __expf(v[k][j] - max_val);
        s += v[k][j];
      }
    block_reduce_to<false>(s, warp_sum_part, &cta_sum);
    cluster.sync();
    cluster_reduce_to<false>(cluster, &cta_sum, &row_sum);
    const float inv = 1.f / row_sum;
    float4* out = reinterpret_cast<float4*>(y + row * cols) + first;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int i = threadIdx.x + k * kThreads;
      if (i < slots)
        out[i] = make_float4(v[k][0] * inv, v[k][1] * inv, v[k][2] * inv, v[k][3] * inv);
    }
    if constexpr (kNext) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) v[k][j] = next[k][j];
    } else {
      load_chunk(x, row + clusters, rows, cols, first, slots, v);
    }
  }
  cluster.sync();  // no CTA leaves while another may still read its cta_sum
#endif
}

int g_packs = 8;
int g_persistent = 0;  // 0: a cluster per row; 1: as many clusters as fit at once, looping
int g_next = 0;        // with g_persistent: the next row's loads in flight

// A launch of `blocks` CTAs of kThreads in clusters of `cluster` along x; `attr` must outlive it.
cudaLaunchConfig_t cluster_config(int cluster, int64_t blocks, cudaStream_t stream,
                                  cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = cluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// CTAs per row: enough for the row's float4 slots at `packs` float4 a thread, at least 2.
int cluster_size(int cols, int packs) {
  const int chunk = kThreads * packs;
  return std::max(2, (cols / 4 + chunk - 1) / chunk);
}

template <int kPacks, bool kNext>
void launch_packs(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const int slots = cols / 4;
  const int cluster = cluster_size(cols, kPacks);
  if (cluster > kMaxCluster)
    throw std::invalid_argument("cluster_probe: a row of " + std::to_string(cols) +
                                " floats needs more than 16 CTAs at --packs " +
                                std::to_string(kPacks));
  const int chunk = (slots + cluster - 1) / cluster;
  const auto kernel = cluster_row_kernel<kPacks, kNext>;
  if (cluster > 8)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = cluster_config(cluster, int64_t(rows) * cluster, stream, &attr);
  if (g_persistent) {
    int fit = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg));
    if (fit < 1) throw std::runtime_error("cluster_probe: no cluster of this size fits");
    const int64_t clusters = std::min<int64_t>(rows, fit);
    cfg.gridDim = dim3(static_cast<unsigned>(clusters * cluster));
  }
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, x, y, rows, cols, chunk));
  CUDA_CHECK_LAUNCH();
}

// The clusters of this size that fit at once (cudaOccupancyMaxActiveClusters), for the report.
int clusters_that_fit(int cols) {
  const int cluster = cluster_size(cols, g_packs);
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(cluster, cluster, 0, &attr);
  int fit = 0;
  const auto probe = [&](auto kernel) {
    if (cluster > 8)
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg));
  };
  if (g_packs == 2)
    probe(cluster_row_kernel<2, false>);
  else if (g_packs == 4)
    probe(g_next ? cluster_row_kernel<4, true> : cluster_row_kernel<4, false>);
  else
    probe(cluster_row_kernel<8, false>);
  return fit;
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("cluster_probe", x, y, rows, cols, kMaxCluster * kThreads * 8 * 4);
  if (cols % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(y) % 16 != 0)
    throw std::invalid_argument(
        "cluster_probe: rows must start on 16-byte boundaries (N % 4 == 0, "
        "x and y 16-byte aligned)");
  if (g_packs == 2) return launch_packs<2, false>(x, y, rows, cols, stream);
  if (g_packs == 4 && g_next) return launch_packs<4, true>(x, y, rows, cols, stream);
  if (g_packs == 4) return launch_packs<4, false>(x, y, rows, cols, stream);
  launch_packs<8, false>(x, y, rows, cols, stream);
}

int max_cols() { return kMaxCluster * kThreads * g_packs * 4; }
softmax::Traffic traffic(int) { return softmax::kIdealTraffic; }

struct Shape {
  int rows, cols;
};

bool parse_shape(const std::string& s, Shape* out) {
  const size_t x = s.find('x');
  if (x == std::string::npos) return false;
  try {
    size_t a = 0, b = 0;
    out->rows = std::stoi(s.substr(0, x), &a);
    out->cols = std::stoi(s.substr(x + 1), &b);
    return a == x && b == s.size() - x - 1 && out->rows > 0 && out->cols > 0;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 30;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    Shape sh;
    if ((a == "--packs" || a == "--iters") && i + 1 < argc) {
      const int v = std::atoi(argv[++i]);
      if (a == "--packs")
        g_packs = v;
      else
        iters = v;
    } else if (a == "--persistent") {
      g_persistent = 1;
    } else if (a == "--next") {
      g_persistent = g_next = 1;
    } else if (parse_shape(a, &sh)) {
      shapes.push_back(sh);
    } else {
      std::fprintf(
          stderr, "usage: %s [--packs 2|4|8] [--persistent | --next] [--iters K] [ROWSxCOLS ...]\n",
          argv[0]);
      return 2;
    }
  }
  if ((g_packs != 2 && g_packs != 4 && g_packs != 8) || iters < softmax::kMinRuns ||
      (g_next && g_packs != 4)) {
    std::fprintf(stderr, "%s: --packs must be 2, 4 or 8 (4 with --next) and --iters at least %d\n",
                 argv[0], softmax::kMinRuns);
    return 2;
  }
  if (!softmax::require_clusters(argv[0])) return softmax::kExitNoGpu;
  const softmax::DeviceInfo dev = softmax::query_device();
  if (shapes.empty()) {
    for (int e = 14; e <= 18; ++e) shapes.push_back({1 << (27 - e), 1 << e});
    shapes.insert(shapes.end(), {{64, 262144}, {32, 16384}, {128, 4096}});
  }
  const softmax::Step probe{"cluster_probe", "a row split across a thread block cluster", launch,
                            max_cols, traffic};
  const softmax::Step* step07 = softmax::find_step("step07_persistent");
  std::printf(
      "%s\ncluster_probe: 512 threads x %d float4 per CTA, %s, L2 flushed before each of "
      "%d timed launches, memcpy and step07 interleaved\n",
      dev.summary().c_str(), g_packs,
      g_next         ? "persistent clusters, next row in flight"
      : g_persistent ? "persistent clusters"
                     : "a cluster per row",
      iters);
  std::printf("%8s %8s %8s %6s %10s %10s %8s %14s  %s\n", "rows", "cols", "cluster", "fit", "us",
              "GB/s", "ratio", "step07/probe", "verified");
  size_t most = 0;
  for (const Shape& sh : shapes) most = std::max(most, size_t(sh.rows) * sh.cols);
  int failed = 0;
  try {
    softmax::TimingBuffers buf(most);
    softmax::Timer timer;
    for (const Shape& sh : shapes) {
      const int cluster = cluster_size(sh.cols, g_packs);
      if (sh.cols % 4 != 0 || cluster > kMaxCluster) {
        std::printf("%8d %8d %8s  not run: %s\n", sh.rows, sh.cols, "-",
                    sh.cols % 4 ? "N % 4 != 0" : "needs more than 16 CTAs");
        continue;
      }
      softmax::VerifyResult r;
      for (softmax::InputKind kind : {softmax::InputKind::kNormal, softmax::InputKind::kNonFinite,
                                      softmax::InputKind::kMaxAtEnds}) {
        r = softmax::check_step(probe, std::min(sh.rows, 12), sh.cols, kind, 1234 + sh.cols);
        if (!r.ok()) break;
      }
      if (!r.ok()) ++failed;
      const softmax::Measurement m =
          softmax::measure(probe, timer, buf, sh.rows, sh.cols, iters, step07);
      std::printf("%8d %8d %8d %6d %10.2f %10.0f %8.3f %14.3f  %s\n", sh.rows, sh.cols, cluster,
                  clusters_that_fit(sh.cols), m.kernel.median_ms * 1000, m.gbps, m.ratio,
                  step07 ? m.rival.median_ms / m.kernel.median_ms : 0.0,
                  r.ok() ? "ok" : r.report().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cluster_probe: %s\n", e.what());
    return 1;
  }
  return failed ? 1 : 0;
}
