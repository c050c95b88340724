// SPDX-License-Identifier: MIT
// step08_cluster's plan, for its program, the tests and the tools.
#pragma once

#include <string>

namespace step08_cluster {

// The current device can run the cluster kernel: sm_90 or later, cluster launch supported, and
// code for it in this build. False without a usable device.
bool clusters_usable();

// K, the CTAs of the cluster that takes rows of `cols` floats: the fewest that hold the row
// (2..16, for 16388..262147 floats), or 0 where the row takes step07's launcher (one CTA's worth
// or less, more than 16 CTAs' worth, no clusters, or no cluster of K fits on this GPU).
int cluster_size(int cols);

// One line for the program's output: whether this GPU takes clusters, and if not, why not.
std::string cluster_report();

}  // namespace step08_cluster
