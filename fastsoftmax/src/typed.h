// SPDX-License-Identifier: MIT
// fastsoftmax: the dispatch of the 16-bit forward and of the backward in every dtype
// (typed_launch.cuh; instantiated in typed_f32.cu, typed_f16.cu, typed_bf16.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace fastsoftmax::detail {

// Arguments already checked (rows, cols >= 1; pointers aligned to the element; no partial
// overlap). While describe() records, nothing is launched.
template <typename T>
void dispatch_forward_typed(const T* x, T* y, int rows, int cols, cudaStream_t stream);
template <typename T>
void dispatch_backward(const T* y, const T* dy, T* dx, int rows, int cols, cudaStream_t stream);

}  // namespace fastsoftmax::detail
