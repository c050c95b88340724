// SPDX-License-Identifier: MIT
// fastsoftmax: whether thread block clusters are in use (sm_90 and later, unless turned off).
#include <atomic>
#include <cstdlib>
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
  int device = 0, major = 0;
  FS_CHECK(cudaGetDevice(&device));
  FS_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
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
  if (!g_clusters_on.load())
    return "thread block clusters: turned off (set_clusters_enabled or FASTSOFTMAX_NO_CLUSTERS); "
           "long rows and few rows take the fallback paths";
  return "thread block clusters: available (" + arch +
         "): long rows and few rows are split over several SMs";
}

}  // namespace fastsoftmax::detail
