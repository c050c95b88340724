// SPDX-License-Identifier: MIT
// step08_cluster as a standalone program: verify on 1823x781, then the bandwidth sweep (--help for
// options). It first says whether this GPU takes thread block clusters (without them every row
// takes step07's launcher).
#include <cstdio>
#include <string>

#include "common/device.h"
#include "common/program.h"
#include "common/softmax.h"
#include "step08.h"

namespace step08_cluster {
const softmax::Step& step();
}

int main(int argc, char** argv) {
  std::string why;
  if (softmax::gpu_available(&why)) std::printf("%s\n", step08_cluster::cluster_report().c_str());
  return softmax::step_main(argc, argv, step08_cluster::step());
}
