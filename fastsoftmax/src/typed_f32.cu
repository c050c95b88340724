// SPDX-License-Identifier: MIT
// fastsoftmax: the typed kernels for float (typed_launch.cuh).
#include "typed.h"
#include "typed_launch.cuh"

namespace fastsoftmax::detail {

template <>
void dispatch_backward<float>(const float* y, const float* dy, float* dx, int rows, int cols,
                              cudaStream_t stream) {
  launch_typed<float, true>(y, dy, dx, rows, cols, stream);
}

}  // namespace fastsoftmax::detail
