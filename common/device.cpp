// SPDX-License-Identifier: MIT
#include "common/device.h"

#include <cuda_runtime.h>

#include <dlfcn.h>

#include <cstdio>
#include <sstream>

#include "common/cuda_check.h"

namespace softmax {

bool gpu_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later checks start clean
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

bool require_gpu(const std::string& program) {
  std::string why;
  if (gpu_available(&why)) return true;
  std::fprintf(stderr, "%s: %s; nothing to run (exit code %d means skipped)\n", program.c_str(),
               why.c_str(), kExitNoGpu);
  return false;
}

bool require_clusters(const std::string& program) {
  if (!require_gpu(program)) return false;
  const DeviceInfo dev = query_device();
  if (dev.cc_major >= 9) return true;
  std::fprintf(stderr, "%s: %s (sm_%d%d) has no thread block clusters (sm_90 and later)\n",
               program.c_str(), dev.name.c_str(), dev.cc_major, dev.cc_minor);
  return false;
}

static std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// The driver's version string ("580.159.04") comes from NVML, loaded at run time so that the
// programs still start (and report SKIPPED) on machines without the NVIDIA driver.
static std::string nvml_driver_version() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return "unknown";
  using InitFn = int (*)();
  using VersionFn = int (*)(char*, unsigned);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto version = reinterpret_cast<VersionFn>(dlsym(lib, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(lib, "nvmlShutdown"));
  std::string result = "unknown";
  if (init && version && shutdown && init() == 0) {
    char buf[96] = {};
    if (version(buf, sizeof buf) == 0) result = buf;
    shutdown();
  }
  dlclose(lib);
  return result;
}

std::string DeviceInfo::driver_string() const { return version_string(driver_version); }
std::string DeviceInfo::runtime_string() const { return version_string(runtime_version); }

std::string DeviceInfo::summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "device %d: %s (sm_%d%d), %d SMs, L2 %.1f MB, smem/block opt-in %d KB\n"
                "memory: %d-bit bus at %.0f MHz, theoretical peak %.0f GB/s\n"
                "driver %s (CUDA %s), runtime CUDA %s",
                device, name.c_str(), cc_major, cc_minor, sm_count, l2_bytes / 1e6,
                smem_per_block_optin / 1024, bus_width_bits, mem_clock_khz / 1e3, peak_gbps,
                kernel_driver.c_str(), driver_string().c_str(), runtime_string().c_str());
  return buf;
}

double peak_dram_gbps(int device) {
  int clock_khz = 0, bus_bits = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

DeviceInfo query_device() {
  DeviceInfo d;
  CUDA_CHECK(cudaGetDevice(&d.device));
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, d.device));
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = p.l2CacheSize;
  d.smem_per_block_optin = static_cast<int>(p.sharedMemPerBlockOptin);
  d.bus_width_bits = p.memoryBusWidth;
  int clock_khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, d.device));
  d.mem_clock_khz = clock_khz;
  d.peak_gbps = peak_dram_gbps(d.device);
  CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  d.kernel_driver = nvml_driver_version();
  return d;
}

}  // namespace softmax
