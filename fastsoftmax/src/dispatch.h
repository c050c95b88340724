// SPDX-License-Identifier: MIT
// fastsoftmax: the dispatch behind softmax() and describe() (dispatch.cu).
#pragma once

#include <cuda_runtime.h>

namespace fastsoftmax::detail {

// Launches the path docs/library.md's table gives rows x cols (arguments already checked: both
// at least 1, x and y 4-byte aligned, not partly overlapping). While describe() records, it
// launches nothing (plan_record.h).
void dispatch(const float* x, float* y, int rows, int cols, cudaStream_t stream);

}  // namespace fastsoftmax::detail
