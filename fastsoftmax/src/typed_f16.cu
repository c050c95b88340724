// SPDX-License-Identifier: MIT
// fastsoftmax: the typed kernels for __half (typed_launch.cuh).
#include "typed.h"
#include "typed_launch.cuh"

namespace fastsoftmax::detail {

template <>
void dispatch_forward_typed<__half>(const __half* x, __half* y, int rows, int cols,
                                    cudaStream_t stream) {
  launch_typed<__half, false>(x, x, y, rows, cols, stream);
}

template <>
void dispatch_backward<__half>(const __half* y, const __half* dy, __half* dx, int rows, int cols,
                               cudaStream_t stream) {
  launch_typed<__half, true>(y, dy, dx, rows, cols, stream);
}

}  // namespace fastsoftmax::detail
