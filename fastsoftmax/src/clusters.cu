// SPDX-License-Identifier: MIT
// fastsoftmax: whether thread block clusters are in use (sm_90 and later, unless turned off).
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "check.h"
#include "split.h"

namespace fastsoftmax::detail {

namespace {

// Clusters are in use unless use_clusters(false) or FASTSOFTMAX_NO_CLUSTERS (set, not "0") says
// not: the environment variable shows the fallback paths inside any program (tools/sanitize.sh).
bool clusters_wanted_at_start() {
  const char* off = std::getenv("FASTSOFTMAX_NO_CLUSTERS");
  return off == nullptr || std::string(off).empty() || std::string(off) == "0";
}
std::atomic<bool> g_clusters_on{clusters_wanted_at_start()};

}  // namespace

bool clusters_usable() {
  if (!g_clusters_on.load()) return false;
  // The device can launch clusters (sm_90 and later), and this build holds the cluster kernels
  // for it. Looked up once per device.
  static std::mutex mutex;
  static std::map<int, bool> usable;
  int device = 0;
  FS_CHECK(cudaGetDevice(&device));
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = usable.find(device);
    if (found != usable.end()) return found->second;
  }
  int major = 0, cluster_launch = 0;
  FS_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FS_CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device));
  const bool ok = major >= 9 && cluster_launch != 0 && cluster_kernels_built();
  std::lock_guard<std::mutex> lock(mutex);
  return usable.emplace(device, ok).first->second;
}

void use_clusters(bool on) { g_clusters_on.store(on); }

std::string cluster_report() {
  int device = 0, major = 0, minor = 0;
  FS_CHECK(cudaGetDevice(&device));
  FS_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FS_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major < 9)
    return "thread block clusters: not on this GPU (" + arch +
           "; they need sm_90): long rows and few rows take the fallback paths";
  if (g_clusters_on.load() && !clusters_usable())
    return "thread block clusters: not usable here (" + arch +
           ": no cluster launch, or this build has no sm_90 code); long rows and few rows take "
           "the fallback paths";
  if (!g_clusters_on.load())
    return "thread block clusters: turned off (set_clusters_enabled or FASTSOFTMAX_NO_CLUSTERS); "
           "long rows and few rows take the fallback paths";
  return "thread block clusters: available (" + arch +
         "): long rows and few rows are split over several SMs";
}

}  // namespace fastsoftmax::detail
