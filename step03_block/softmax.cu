// SPDX-License-Identifier: MIT
// step03_block: one block per row; threads stride the row and merge through shared memory.
//
// What changed: a row belongs to a 256-thread block instead of a 32-lane warp, so a long row is
//   split 8 times finer and 4096 rows make 4096 blocks of 8 warps each, enough to fill the GPU.
//   Each thread keeps the online (max, sum) of step02 over its columns; the 256 partial pairs are
//   merged by a tree in shared memory: half the threads merge a pair each, a barrier, half again,
//   8 levels down to one pair, which every thread then reads.
// Mapping:  grid = rows, blockDim = 256; block -> one row; thread t -> columns t, t+256, ...
// Traffic:  reads 2 per element, writes 1: 12*M*N bytes modeled (as step02).
// Accuracy: one float chain per thread is enough, no chunks as in step02: N/256 terms, 8 times
//           fewer than a step02 lane's, about 1,172 at N = 300007 (tests/test_long_rows.cpp).
// Limit:    the normalise pass reads the row from DRAM a second time: 12*M*N bytes where 8*M*N
//           would do. step04 keeps the row in shared memory between the two passes.
// Run:      ./build/step03_block/step03_block        (--help for options)
#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step03_block {

constexpr int kThreads = 256;

// Folds one element into the running (max, sum). A -inf element contributes exactly 0 whatever
// the max, so it is skipped: folding it while the max is still -inf would compute
// exp(-inf - -inf) = NaN and poison a row that torch.softmax handles.
__device__ __forceinline__ void online_update(float& max_val, float& sum, float v) {
  if (v == -INFINITY) return;
  const float new_max = fmaxf(max_val, v);
  sum = sum * expf(max_val - new_max) + expf(v - new_max);
  max_val = new_max;
}

// exp(part_max - max_val), the factor that moves a partial sum onto a larger max. Equal maxima
// give 1 even when both are infinite: two partials that saw only -inf (sum 0) or only NaN
// (sum NaN) merge to 0 or NaN, never to exp(-inf - -inf) = NaN. A +inf max needs no care: the
// partial that saw the +inf already has sum NaN (from exp(inf - inf)), and the merge keeps it.
__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : expf(part_max - max_val);
}

// Merges the partial (other_max, other_sum) into (max_val, sum). The add is __fadd_rn so the
// compiler cannot fuse one product into an FMA: merge(a, b) and merge(b, a) then round the same
// way, and both lanes of a butterfly step end with bit-identical results.
__device__ __forceinline__ void merge(float& max_val, float& sum, float other_max,
                                      float other_sum) {
  const float new_max = fmaxf(max_val, other_max);
  sum = __fadd_rn(sum * rescale(max_val, new_max), other_sum * rescale(other_max, new_max));
  max_val = new_max;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols) {
  // One partial (max, sum) per thread, merged in place by the tree below.
  __shared__ float part_max[kThreads];
  __shared__ float part_sum[kThreads];

  const int tid = threadIdx.x;
  // grid = rows, so each block owns exactly one row: the shared arrays never carry one row's
  // partials into the next.
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;

  // Pass 1: each thread's online (max, sum) over its columns; a warp's 32 threads read 32
  // neighbouring floats per iteration, so the loads still coalesce.
  float max_val = -INFINITY;
  float sum = 0.f;
  for (int c = tid; c < cols; c += kThreads) online_update(max_val, sum, in[c]);

  // Tree: at each level the lower half merges the upper half's pair into its own. A thread with
  // no columns (cols < 256) holds (-inf, 0), which merges as a no-op. The barrier after each
  // level makes its writes visible before the next level reads them.
  part_max[tid] = max_val;
  part_sum[tid] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      merge(max_val, sum, part_max[tid + stride], part_sum[tid + stride]);
      part_max[tid] = max_val;
      part_sum[tid] = sum;
    }
    __syncthreads();
  }
  max_val = part_max[0];
  sum = part_sum[0];

  // Pass 2: normalise. An all -inf row has max -inf, so exp(NaN) makes it NaN, as in torch.
  const float inv_sum = 1.f / sum;
  for (int c = tid; c < cols; c += kThreads) out[c] = expf(in[c] - max_val) * inv_sum;
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step03_block", x, y, rows, cols, softmax::kNoColLimit);
  // gridDim.x may be up to 2^31 - 1, so one block per row is a legal grid for any int rows.
  softmax_kernel<<<rows, kThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }

softmax::Traffic traffic(int /*cols*/) { return {2, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step03_block", "one block per row: shared-memory tree reduction",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step03_block
