// SPDX-License-Identifier: MIT
// mbarrier_probe: the smallest cluster kernel that uses an mbarrier the way step08's path (g)
// does, to tell what compute-sanitizer's synccheck says about the pattern apart from what it says
// about step08's kernel.
//
//   build/softmax_mbarrier_probe [K] [BULK]        K: CTAs per cluster, 1..16 (default 16)
//   compute-sanitizer --tool synccheck build/softmax_mbarrier_probe 16 1
//
// Each CTA (512 threads, 64 KB of dynamic shared memory: two per SM, as in path g) sets up one
// mbarrier with an arrival count of 1 (thread 0: mbarrier.init, fence.mbarrier_init, fence.proxy.async,
// then a block barrier), then for each of 6 rounds: thread 0 arrives with expect_tx of the round's
// bytes and, with BULK = 1 (the default), issues one cp.async.bulk of 64 KB into shared memory
// that completes them; BULK = 0 expects 0 bytes, so the arrival alone completes the phase. Every
// thread waits for the round's phase (try_wait.parity), reads the buffer, and a block barrier ends
// the round. A relaxed cluster barrier precedes exit. The launch is 8 clusters of K CTAs.
// Prints the launch's and the synchronisation's CUDA status. Exit codes: 0 ok, 1 a CUDA error,
// 2 bad usage, 77 no GPU or no clusters.
//
// On the H100 (docs/notes/step08.md, change 5) synccheck finds nothing for K = 4, 8, 9 and 12,
// and reports "Missing wait" at the first arrival for K = 16 with or without the bulk copy, after
// which the kernel ends in an illegal address under synccheck only (plain and memcheck runs are
// clean). step08's own kernel gets the same report in clusters of 12 as well as 16.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/device.h"

namespace {

constexpr int kThreads = 512;
constexpr int kSlots = kThreads * 8;  // float4 per CTA: 64 KB
[[maybe_unused]] constexpr int kRounds = 6;
constexpr int kClusters = 8;

__global__ void __launch_bounds__(kThreads, 2)
    probe_kernel(const float4* __restrict__ x, float* __restrict__ sink, int bulk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ float4 buffer[];
  __shared__ unsigned long long barrier;
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&barrier));
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(buffer));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  const uint32_t bytes = bulk ? kSlots * uint32_t(sizeof(float4)) : 0;
  float acc = 0.f;
  for (int round = 0; round < kRounds; ++round) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                   "r"(bytes)
                   : "memory");
      if (bytes != 0)
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
            "[%3];" ::"r"(dst),
            "l"(x + size_t(blockIdx.x) * kSlots), "r"(bytes), "r"(bar)
            : "memory");
    }
    uint32_t done = 0;
    do {
      asm volatile(
          "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
          " selp.u32 %0, 1, 0, ready;\n}\n"
          : "=r"(done)
          : "r"(bar), "r"(uint32_t(round & 1))
          : "memory");
    } while (!done);
    if (bulk) acc += buffer[threadIdx.x].x;
    __syncthreads();
  }
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n barrier.cluster.wait.aligned;" :::
                   "memory");
  if (acc != 0.f) sink[0] = acc;  // the input is zeros: never taken, but not removable
#else
  __trap();  // launched only on sm_90 and later (main checks)
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const int k = argc > 1 ? std::atoi(argv[1]) : 16;
  const int bulk = argc > 2 ? std::atoi(argv[2]) : 1;
  if (argc > 3 || k < 1 || k > 16 || (bulk != 0 && bulk != 1)) {
    std::fprintf(stderr, "usage: %s [K (1..16)] [BULK (0 or 1)]\n", argv[0]);
    return 2;
  }
  if (!softmax::require_clusters(argv[0])) return softmax::kExitNoGpu;
  const size_t ctas = size_t(k) * kClusters;
  softmax::DeviceBuffer<float4> x(ctas * kSlots);
  softmax::DeviceBuffer<float> sink(1);
  CUDA_CHECK(cudaMemset(x.get(), 0, ctas * kSlots * sizeof(float4)));
  const int smem = kSlots * int(sizeof(float4));
  CUDA_CHECK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUDA_CHECK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(k);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  const cudaError_t launched =
      cudaLaunchKernelEx(&cfg, probe_kernel, static_cast<const float4*>(x.get()), sink.get(), bulk);
  const cudaError_t synced = cudaDeviceSynchronize();
  std::printf("mbarrier_probe: %d clusters of %d CTAs, bulk copy %s: launch %s, run %s\n",
              kClusters, k, bulk ? "on" : "off", cudaGetErrorString(launched),
              cudaGetErrorString(synced));
  return launched == cudaSuccess && synced == cudaSuccess ? 0 : 1;
}
