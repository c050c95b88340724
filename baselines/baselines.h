// SPDX-License-Identifier: MIT
// Reference points for the charts, not steps: what a framework without fusion runs, and the
// vendor library. Same launcher signature as the steps.
#pragma once

#include <vector>

#include "common/softmax.h"

namespace baselines {

// Five kernels (row max; subtract; exp; row sum; divide), each a full trip through DRAM.
const softmax::Step& unfused();

// True when the build found cuDNN; cudnn() throws std::runtime_error otherwise.
bool have_cudnn();
// cudnnSoftmaxForward, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE.
const softmax::Step& cudnn();

// unfused, then cudnn when present.
std::vector<softmax::Step> all();

}  // namespace baselines
