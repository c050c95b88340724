// SPDX-License-Identifier: MIT
// The unfused softmax: what a framework runs when every operation is its own kernel.
//
//   max[r] = max_c x[r][c]        reads MN,      writes M
//   y      = x - max[r]           reads MN + M,  writes MN
//   y      = exp(y)               reads MN,      writes MN
//   sum[r] = sum_c y[r][c]        reads MN,      writes M
//   y      = y / sum[r]           reads MN + M,  writes MN
//   total                         reads 5MN + 2M, writes 3MN + 2M (Triton's tutorial counts the same)
//
// Each kernel is reasonable on its own (coalesced, one block per row for the reductions); what it
// costs is the trips through DRAM that fusion removes.
#include <algorithm>
#include <stdexcept>

#include "baselines/baselines.h"
#include "common/cuda_check.h"
#include "common/device_buffer.h"

namespace baselines {
namespace {

constexpr int kThreads = 256;

template <bool kMax>
__global__ void row_reduce_kernel(const float* __restrict__ in, float* __restrict__ out, int cols) {
  __shared__ float partial[kThreads];
  const float* row = in + static_cast<size_t>(blockIdx.x) * cols;
  float acc = kMax ? -INFINITY : 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    // A NaN must survive the max (fmaxf would drop it): torch's max propagates NaN.
    acc = kMax ? ((row[c] != row[c] || row[c] > acc) ? row[c] : acc) : acc + row[c];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float a = partial[threadIdx.x], b = partial[threadIdx.x + stride];
      partial[threadIdx.x] = kMax ? ((b != b || b > a) ? b : a) : a + b;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

enum class Op { kSubtract, kExp, kDivide };

template <Op kOp>
__global__ void elementwise_kernel(const float* __restrict__ in, const float* __restrict__ row_val,
                                   float* __restrict__ out, size_t n, int cols) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    if (kOp == Op::kSubtract) out[i] = in[i] - row_val[i / cols];
    if (kOp == Op::kExp) out[i] = expf(in[i]);
    if (kOp == Op::kDivide) out[i] = in[i] / row_val[i / cols];
  }
}

// Per-row scratch (max and sum), grown on demand and kept: allocating inside a timed launch would
// time cudaMalloc. Not thread-safe, like the rest of the harness.
float* row_scratch(int rows) {
  static softmax::DeviceBuffer<float> scratch;
  if (scratch.size() < 2 * static_cast<size_t>(rows)) {
    CUDA_CHECK(cudaDeviceSynchronize());  // earlier launches may still use the old buffer
    scratch = softmax::DeviceBuffer<float>(2 * static_cast<size_t>(rows));
  }
  return scratch.get();
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("unfused", x, y, rows, cols, softmax::kNoColLimit);
  float* row_max = row_scratch(rows);
  float* row_sum = row_max + rows;
  const size_t n = static_cast<size_t>(rows) * cols;
  const int blocks = static_cast<int>(std::min<size_t>((n + kThreads - 1) / kThreads, 65536));

  row_reduce_kernel<true><<<rows, kThreads, 0, stream>>>(x, row_max, cols);
  CUDA_CHECK_LAUNCH();
  elementwise_kernel<Op::kSubtract><<<blocks, kThreads, 0, stream>>>(x, row_max, y, n, cols);
  CUDA_CHECK_LAUNCH();
  elementwise_kernel<Op::kExp><<<blocks, kThreads, 0, stream>>>(y, nullptr, y, n, cols);
  CUDA_CHECK_LAUNCH();
  row_reduce_kernel<false><<<rows, kThreads, 0, stream>>>(y, row_sum, cols);
  CUDA_CHECK_LAUNCH();
  elementwise_kernel<Op::kDivide><<<blocks, kThreads, 0, stream>>>(y, row_sum, y, n, cols);
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }
softmax::Traffic traffic(int /*cols*/) { return {5, 3, 2, 2}; }

}  // namespace

const softmax::Step& unfused() {
  static const softmax::Step s{"unfused", "five separate kernels, as without fusion", launch,
                               max_cols, traffic};
  return s;
}

std::vector<softmax::Step> all() {
  std::vector<softmax::Step> list = {unfused()};
  if (have_cudnn()) list.push_back(cudnn());
  return list;
}

}  // namespace baselines
