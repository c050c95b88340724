// SPDX-License-Identifier: MIT
// step04_smem: step03 with the row cached in shared memory: DRAM is read once.
//
// What changed: pass 1 stores every element it reads into a dynamic shared-memory buffer of
//   cols floats, and the normalise pass reads the row from there instead of from DRAM. The fused
//   ideal is reached: one read and one write per element. The price is a column limit: the row
//   must fit in the shared memory one block may have (227 KB on an H100, opted in with
//   cudaFuncSetAttribute since the default is 48 KB), so max_cols() is 57,600 there.
// Mapping:  grid = rows, blockDim = 256; block -> one row; thread t -> columns t, t+256, ...
//           (as step03); shared row_cache[c] holds x[row][c].
// Traffic:  reads 1 per element, writes 1: 8*M*N bytes modeled, the ideal.
// Limit:    every global access is a 4-byte load or store, so moving a row takes 4x more memory
//           instructions than 16-byte accesses would, and each thread has fewer bytes in flight
//           to cover DRAM latency. step05 reads and writes float4.
// Run:      ./build/step04_smem/step04_smem          (--help for options)
#include "common/cuda_check.h"
#include "common/softmax.h"

#include <mutex>
#include <unordered_map>

namespace step04_smem {

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
  // The row itself, cols floats; the launch sizes it.
  extern __shared__ float row_cache[];

  const int tid = threadIdx.x;
  // grid = rows, so each block owns exactly one row: the shared arrays never carry one row's
  // partials into the next.
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;

  // Pass 1: each thread's online (max, sum) over its columns; a warp's 32 threads read 32
  // neighbouring floats per iteration, so the loads still coalesce. Each element is also kept
  // in shared memory for pass 2.
  float max_val = -INFINITY;
  float sum = 0.f;
  for (int c = tid; c < cols; c += kThreads) {
    const float v = in[c];
    row_cache[c] = v;
    online_update(max_val, sum, v);
  }

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

  // Pass 2: normalise, reading the row from shared memory instead of DRAM. Thread t reads back
  // only the columns it wrote itself, so no barrier is needed for row_cache (the tree's
  // barriers order it anyway). An all -inf row has max -inf, so exp(NaN) makes it NaN, as in
  // torch.
  const float inv_sum = 1.f / sum;
  for (int c = tid; c < cols; c += kThreads) out[c] = expf(row_cache[c] - max_val) * inv_sum;
}

// The largest row the current device can cache: the opt-in shared memory per block less the
// kernel's static arrays (the tree's 2 KB). A kernel may use more than 48 KB of dynamic shared
// memory only after opting in with cudaFuncSetAttribute; that is done here, once per device.
int max_cols() {
  static std::mutex mutex;
  static std::unordered_map<int, int> cols_by_device;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cols_by_device.find(device);
  if (found != cols_by_device.end()) return found->second;

  int optin_bytes = 0;
  CUDA_CHECK(
      cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, softmax_kernel));
  const int dynamic_bytes = optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
  CUDA_CHECK(cudaFuncSetAttribute(softmax_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  dynamic_bytes));
  const int cols = dynamic_bytes / static_cast<int>(sizeof(float));
  cols_by_device.emplace(device, cols);
  return cols;
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  // Checks cols against max_cols() too (and max_cols() opts the kernel in to the shared memory).
  softmax::check_launch_args("step04_smem", x, y, rows, cols, max_cols());
  const size_t smem_bytes = static_cast<size_t>(cols) * sizeof(float);
  // gridDim.x may be up to 2^31 - 1, so one block per row is a legal grid for any int rows.
  softmax_kernel<<<rows, kThreads, smem_bytes, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

softmax::Traffic traffic(int /*cols*/) { return {1, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step04_smem", "row cached in shared memory: DRAM read once",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step04_smem
