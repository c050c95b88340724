// SPDX-License-Identifier: MIT
// step00_naive: one thread per row, three passes over global memory.
//
// What it does: thread r owns row r and walks it three times: (1) the row max, (2) the sum of
//   exp(x - max), (3) y = exp(x - max) / sum. Subtracting the max keeps exp() from overflowing.
// Mapping:  grid-stride over rows, blockDim = 128; thread -> one whole row.
// Traffic:  reads 3 per element (one per pass), writes 1 per element: 16*M*N bytes modeled,
//           twice the fused ideal of 8*M*N.
// Accuracy: one thread adds all N terms of the sum. In float, terms smaller than half an ulp of
//           the running sum round away systematically, and from a few thousand columns on the
//           relative error of the sum passes the 1e-5 tolerance on this repository's inputs
//           (one planted peak makes most terms tiny). So the sum is accumulated in double; the
//           exp() terms stay float. From step02 on the sums are float: step02 splits a row over
//           32 lanes and cuts each lane's chain into chunks of 256 terms, and later steps give a
//           long row 256 or more threads, so no float chain grows long.
// Limit:    neighbouring threads read addresses N*4 bytes apart, so no load coalesces, and only
//           M threads exist (4096 rows = 128 warps for 132 SMs): latency-bound. step01 removes one
//           of the three passes; step02 fixes the mapping.
// Run:      ./build/step00_naive/step00_naive        (--help for options)
#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step00_naive {

constexpr int kThreads = 128;

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols) {
  for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += gridDim.x * blockDim.x) {
    const float* in = x + static_cast<size_t>(row) * cols;
    float* out = y + static_cast<size_t>(row) * cols;

    // Pass 1: the row max. fmaxf ignores a NaN, but a NaN still reaches the sum in pass 2, which
    // then turns the whole row into NaN, as torch.softmax does.
    float max_val = -INFINITY;
    for (int c = 0; c < cols; ++c) max_val = fmaxf(max_val, in[c]);

    // Pass 2: the normaliser (accumulated in double: see the header).
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += expf(in[c] - max_val);

    // Pass 3: normalise. exp() is recomputed rather than stored: storing it would cost a write
    // and a read per element, more than the arithmetic.
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - max_val) * inv_sum;
  }
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step00_naive", x, y, rows, cols, softmax::kNoColLimit);
  const int blocks = (rows + kThreads - 1) / kThreads;
  softmax_kernel<<<blocks, kThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }

softmax::Traffic traffic(int /*cols*/) { return {3, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step00_naive", "one thread per row, three passes over DRAM",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step00_naive
