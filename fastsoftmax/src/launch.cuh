// SPDX-License-Identifier: MIT
// fastsoftmax, host side: what the launchers know about the device, and the persistent grid
// (docs/library.md, "The persistent grid and waves").
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "check.h"
#include "long_rows.cuh"
#include "plan_record.h"

namespace fastsoftmax::detail {

using KernelFn = void (*)(const float*, float*, int, int);

// Launches that share an area of device memory, one a device, take turns: each waits on its
// stream for the one before on the same device, whatever stream that was on (typed_spread's
// pairs, the grid paths' exchange). take(stream, launch) runs launch(device) under the lock,
// after the wait, and records where it ends.
class LaunchTurns {
 public:
  template <typename Launch>
  void take(cudaStream_t stream, Launch&& launch) {
    int device = 0;
    FS_CHECK(cudaGetDevice(&device));
    std::lock_guard<std::mutex> lock(mutex_);
    cudaEvent_t& done = last_[device];
    if (done == nullptr) {
      FS_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    } else {
      FS_CHECK(cudaStreamWaitEvent(stream, done, 0));
    }
    launch(device);
    FS_CHECK(cudaEventRecord(done, stream));
  }

 private:
  std::mutex mutex_;
  std::map<int, cudaEvent_t> last_;  // per device: where the last launch ends
};

struct DeviceInfo {
  int sms = 0;
  int cache_bytes = 0;      // the dynamic shared memory smem_block may use (allow_cache_bytes)
  int64_t cache_slots = 0;  // the most slots smem_block holds in shared memory
  int64_t pair_slots = 0;   // the most slots at which two smem_block blocks fit an SM
  double peak_bytes_per_ns = 0;  // DRAM's theoretical peak: 2 (DDR) * clock * bus width
};

// Looked up once a device. `smem_block` may use all the opt-in shared memory (the default cap is
// 48 KB) beside its static arrays; row_launchers.cuh's allow_cache_bytes allows it, on the kernel
// it launches.
inline const DeviceInfo& device_info() {
  static std::mutex mutex;
  static std::unordered_map<int, DeviceInfo> info_by_device;  // references stay valid
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = info_by_device.find(device);
  if (found != info_by_device.end()) return found->second;

  DeviceInfo info;
  FS_CHECK(cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, device));
  int optin_bytes = 0;
  FS_CHECK(cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes{};
  const KernelFn smem_kernel = smem_block_kernel<kLongRowThreads>;
  FS_CHECK(cudaFuncGetAttributes(&attributes, smem_kernel));
  info.cache_bytes = optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
  // 8 slots fewer than fit: smem_block_kernel may start a row up to 8 slots in.
  info.cache_slots = info.cache_bytes / static_cast<int>(sizeof(float4)) - 8;
  // Two blocks an SM: each takes its dynamic bytes ((slots + 8) float4), its static arrays and
  // the bytes the driver reserves per block, from the SM's shared memory.
  int sm_bytes = 0, reserved_bytes = 0;
  FS_CHECK(
      cudaDeviceGetAttribute(&sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  FS_CHECK(
      cudaDeviceGetAttribute(&reserved_bytes, cudaDevAttrReservedSharedMemoryPerBlock, device));
  const int pair_bytes =
      sm_bytes / 2 - reserved_bytes - static_cast<int>(attributes.sharedSizeBytes);
  info.pair_slots = std::min<int64_t>(info.cache_slots,
                                      pair_bytes / static_cast<int>(sizeof(float4)) - 8);
  int clock_khz = 0, bus_bits = 0;
  FS_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  FS_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  info.peak_bytes_per_ns = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // GB/s = bytes per ns
  return info_by_device.emplace(device, info).first->second;
}

// Whether a rows x cols matrix is small enough that `sub_warp` and `warp` do better loading it
// all at once, a row a group, than with the persistent grid's second round of rows in flight:
// under 31 KB of input an SM (4.19 MB on the 132 SMs of an H100 or H200, just under 4096x256's
// 4 MiB). One row a group was ahead or level at 3.1-3.3 MB and below on both GPUs, the persistent
// grid ahead at 4096x256. A bound in what DRAM delivers in a microsecond (4.8 MB on the H200) put
// 4096x256 on the wrong side there by 0.2 us, so the bound counts bytes an SM.
inline bool latency_bound(int rows, int cols) {
  constexpr int64_t kBytesPerSm = 31 * 1024;
  return int64_t(rows) * cols * int64_t(sizeof(float)) < kBytesPerSm * device_info().sms;
}

// Resident blocks per SM from the occupancy calculator, cached per device, kernel, block size and
// dynamic shared memory (the answer depends on nothing else).
template <typename Kernel>
int blocks_per_sm(Kernel kernel, int threads, size_t smem_bytes) {
  static std::mutex mutex;
  static std::map<std::tuple<int, const void*, int, size_t>, int> cache;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  const auto key =
      std::make_tuple(device, reinterpret_cast<const void*>(kernel), threads, smem_bytes);
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  int blocks = 0;
  FS_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem_bytes));
  cache.emplace(key, blocks);
  return blocks;
}

// The persistent launch: at most as many blocks as the GPU holds at once, balanced so that every
// block gets the same number of rounds (4096 rows on 132 resident blocks would give 4 blocks a
// 32nd row while 128 idle; 128 blocks of 32 rows each finish together), with at least
// `min_rounds` rounds per block. `work_blocks` is how many blocks one round of all rows takes.
inline void launch_persistent(KernelFn kernel, int threads, size_t smem_bytes, int64_t work_blocks,
                              const float* x, float* y, int rows, int cols, cudaStream_t stream,
                              int64_t min_rounds = 1) {
  const int per_sm = std::max(1, blocks_per_sm(kernel, threads, smem_bytes));
  const int64_t resident = int64_t(device_info().sms) * per_sm;
  const int64_t rounds = std::max((work_blocks + resident - 1) / resident, min_rounds);
  const auto blocks = static_cast<unsigned>((work_blocks + rounds - 1) / rounds);
  if (recorded(blocks, threads, smem_bytes)) return;
  kernel<<<blocks, threads, smem_bytes, stream>>>(x, y, rows, cols);
  FS_CHECK_LAUNCH();
}

}  // namespace fastsoftmax::detail
