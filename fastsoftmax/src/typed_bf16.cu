// SPDX-License-Identifier: MIT
// fastsoftmax: the typed kernels for __nv_bfloat16 (typed_launch.cuh).
#include "typed.h"
#include "typed_launch.cuh"

namespace fastsoftmax::detail {

template <>
void dispatch_forward_typed<__nv_bfloat16>(const __nv_bfloat16* x, __nv_bfloat16* y, int rows,
                                           int cols, cudaStream_t stream) {
  launch_typed<__nv_bfloat16, false>(x, x, y, rows, cols, stream);
}

template <>
void dispatch_backward<__nv_bfloat16>(const __nv_bfloat16* y, const __nv_bfloat16* dy,
                                      __nv_bfloat16* dx, int rows, int cols, cudaStream_t stream) {
  launch_typed<__nv_bfloat16, true>(y, dy, dx, rows, cols, stream);
}

}  // namespace fastsoftmax::detail
