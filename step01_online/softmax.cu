// SPDX-License-Identifier: MIT
// step01_online: one thread per row; the max and the sum in one pass (the online normaliser).
//
// What changed: step00's first two passes (max, then sum of exp) become one. The thread keeps a
//   running max m and a running sum d of exp(x - m); when a new element raises the max, the sum
//   so far is rescaled by exp(m_old - m_new) (Milakov & Gimelshein 2018, "Online normalizer
//   calculation for softmax"). The normalise pass is unchanged.
// Mapping:  grid-stride over rows, blockDim = 128; thread -> one whole row (as step00).
// Traffic:  reads 2 per element, writes 1: 12*M*N bytes modeled (step00: 16*M*N).
// Accuracy: as in step00, one thread adds all N terms, so the running sum is kept in double.
// Limit:    still one thread per row: uncoalesced loads and only M threads. step02 gives each
//           row a whole warp.
// Run:      ./build/step01_online/step01_online      (--help for options)
#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step01_online {

constexpr int kThreads = 128;

// Folds one element into the running (max, sum). A -inf element contributes exactly 0 whatever
// the max, so it is skipped: folding it while the max is still -inf would compute
// exp(-inf - -inf) = NaN and poison a row that torch.softmax handles.
__device__ __forceinline__ void online_update(float& max_val, double& sum, float v) {
  if (v == -INFINITY) return;
  const float new_max = fmaxf(max_val, v);
  sum = sum * expf(max_val - new_max) + expf(v - new_max);
  max_val = new_max;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols) {
  for (int row = blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += gridDim.x * blockDim.x) {
    const float* in = x + static_cast<size_t>(row) * cols;
    float* out = y + static_cast<size_t>(row) * cols;

    // Pass 1: max and sum together. A NaN input makes the sum NaN (fmaxf skips it, expf does
    // not), and a +inf makes it NaN through inf - inf: both rows come out NaN, as in torch.
    float max_val = -INFINITY;
    double sum = 0.0;  // see step00's header: one thread's sum of N terms needs double
    for (int c = 0; c < cols; ++c) online_update(max_val, sum, in[c]);

    // Pass 2: normalise. An all -inf row has max -inf, so exp(NaN) makes it NaN, as in torch.
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - max_val) * inv_sum;
  }
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step01_online", x, y, rows, cols, softmax::kNoColLimit);
  const int blocks = (rows + kThreads - 1) / kThreads;
  softmax_kernel<<<blocks, kThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }

softmax::Traffic traffic(int /*cols*/) { return {2, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step01_online", "online max+sum: two passes instead of three",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step01_online
