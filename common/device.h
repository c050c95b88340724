// SPDX-License-Identifier: MIT
// What the harness reports about the GPU, and whether there is one.
#pragma once

#include <string>

namespace softmax {

// Exit code of a program that found no usable CUDA device; CTest reports it as SKIPPED.
inline constexpr int kExitNoGpu = 77;

// True if a CUDA device is usable; otherwise `why` says what the runtime answered.
bool gpu_available(std::string* why);

// For a program's main: true if a CUDA device is usable; otherwise prints "<program>: <why>;
// nothing to run (exit code 77 means skipped)" to stderr and returns false, and the program
// returns kExitNoGpu.
bool require_gpu(const std::string& program);

// For the cluster tools' main: require_gpu, then true if the device has thread block clusters
// (sm_90 and later); otherwise prints "<program>: <GPU> (sm_XY) has no thread block clusters"
// to stderr and returns false, and the program returns kExitNoGpu.
bool require_clusters(const std::string& program);

struct DeviceInfo {
  int device = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int l2_bytes = 0;
  int smem_per_block_optin = 0;
  double mem_clock_khz = 0;  // peak memory clock
  int bus_width_bits = 0;
  double peak_gbps = 0;  // theoretical: 2 (DDR) * clock * bus width / 8
  int driver_version = 0, runtime_version = 0;  // CUDA versions, e.g. 13000
  std::string kernel_driver;  // the NVIDIA driver's own version, e.g. "580.159.04" (NVML)

  std::string driver_string() const;   // "13.0": the CUDA version the driver supports
  std::string runtime_string() const;  // "13.0": the CUDA runtime linked in
  std::string summary() const;         // several lines, for the programs' header
};

DeviceInfo query_device();

// The theoretical peak DRAM bandwidth of `device` in GB/s: 2 (DDR) * memory clock * bus width,
// from two attribute queries (what DeviceInfo::peak_gbps holds), cheap enough for a launcher.
double peak_dram_gbps(int device);

}  // namespace softmax
