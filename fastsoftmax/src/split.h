// SPDX-License-Identifier: MIT
// fastsoftmax: the plan of a row split over several CTAs (the paths `cluster`, `cluster_held`,
// `grid` and `grid_held`), for the dispatcher and for the tests and tools that force a path and
// a CTA count. docs/library.md, "Long rows: clusters" and "Few rows and very long rows: the grid".
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace fastsoftmax::detail {

// kCluster: `cluster` (in CTAs of 128 threads: the small clusters); kGrid: `grid`; kHeld:
// `grid_held`, grid's groups with each CTA's part twice as long, half of it held in shared memory;
// kClusterHeld: `cluster_held`, a cluster a row with grid_held's parts (split_kernels.cuh).
enum class Split { kNone, kCluster, kGrid, kHeld, kClusterHeld };

struct SplitPlan {
  Split path = Split::kNone;  // kNone: not split (a path of a block a row or less takes it)
  int parts = 0;              // K: CTAs per row (the cluster size for kCluster, kClusterHeld)
  int packs = 0;              // float4 slots per thread: 1, 2, 4 or 8 (for kHeld and
                              // kClusterHeld: in registers, and as many again in shared memory)
  int chunk = 0;              // body slots per part
  int64_t groups = 0;         // clusters or groups launched (each loops over rows)
  int threads = 512;          // per CTA: 512 (two an SM), or 1024 for kHeld and kClusterHeld
                              // (one an SM)
  bool tagged = false;        // kGrid, kHeld: pairs as tagged words (TaggedExchange), not behind
                              // a counter (GridExchange); kHeld always, kGrid in <= 4 rounds
                              // or where at most 3 groups fit
  unsigned stagger_ns = 0;    // kCluster in CTAs of 128 threads: cluster g waits
  int64_t stage_groups = 0;   // (g / stage_groups) * stagger_ns before its loads (0 ns: none;
                              // split_make.cu)
};

// Clusters can be used: the current device is sm_90 or later, and neither use_clusters(false)
// nor the environment variable FASTSOFTMAX_NO_CLUSTERS (set, and not "0", at first use) has
// turned them off. Without them every shape runs one of the paths that give a row one block.
bool clusters_usable();
// Whether this build holds the cluster kernels for the current device (code for sm_90 or later,
// not the stubs an older target carries).
bool cluster_kernels_built();
// Tests: turns every split path off (or back on) for this process, to run the fallbacks.
void use_clusters(bool on);
// One line for the program's output: whether clusters are used on this device, and why not.
std::string cluster_report();

// The dispatcher's choice for a rows x cols matrix (path kNone: not split).
SplitPlan plan_split(int rows, int cols);
// A given path and K for rows x cols, as the dispatcher would size it. Throws Error
// (kInvalidArgument) naming the reason when that split cannot run (K out of range, a part too long
// for 8 float4 per thread, or 16 for kHeld and kClusterHeld, no clusters, too few resident CTAs).
// threads: 512, or 1024 for kHeld and kClusterHeld.
SplitPlan make_split(Split path, int parts, int rows, int cols, int threads = 512);
// Launches a plan from plan_split or make_split (x and y as the dispatcher checks them).
void launch_split(const SplitPlan& plan, const float* x, float* y, int rows, int cols,
                  cudaStream_t stream);
// "cluster K=4 P=8 groups=62", for reports ("held" for kHeld, "cluster-held" for kClusterHeld;
// " tagged" after a grid plan whose pairs go as tagged words; " stagger=4x235ns" after a plan
// whose clusters start in 4 stages, 235 ns apart).
std::string describe(const SplitPlan& plan);
// How many clusters of K 512-thread CTAs (8 float4 a thread) fit on this GPU at once, for K = 2,
// 3, 4, 6, 8, 12, 16: "2:132 3:79 ..." (it depends on how the chip's SMs are grouped into GPCs);
// or why there are none. For the benchmark's record.
std::string cluster_fit_report();
// `smem_block`, a block of 512 threads a row holding it in shared memory (long_rows.cuh), at
// rows of `slots` float4: how many of its blocks fit an SM, by the runtime's occupancy
// calculator; and the most slots at which plan_split counts two (from the device's shared memory
// attributes). The test checks that the two agree on either side.
int path_d_blocks_per_sm(int64_t slots);
int64_t path_d_pair_slots();

}  // namespace fastsoftmax::detail
