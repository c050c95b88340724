// SPDX-License-Identifier: MIT
// step05_vectorized: step04 with 16-byte float4 loads and stores.
//
// What changed: the row is read and written as float4, a quarter of the memory instructions and
//   four times the bytes per request. A float4 access must be 16-byte aligned, and a row starts
//   at x + row*cols, which is aligned only when x is and cols % 4 == 0 (the caller may also pass
//   x or y one float off). So each row is cut into a scalar head (0..3 floats up to the first
//   aligned address), a float4 body and a scalar tail (0..3 floats), separately for x and for y,
//   whose alignments may differ. The shared copy keeps x's 16-byte phase, so the load side is
//   float4 into shared memory too; the store side reads float4 from it when y has x's phase and
//   scalars when it has not.
// Mapping:  grid = rows, blockDim = 256; block -> one row; thread t -> float4 t, t+256, ... of
//           the body (head and tail elements go to threads 0..2); shared row_cache[c + phase]
//           holds x[row][c], phase = the float offset of the row start within 16 bytes.
// Traffic:  reads 1 per element, writes 1: 8*M*N bytes modeled (as step04).
// Limit:    the shared-memory tree: 8 levels, each a round trip through shared memory and a
//           block-wide barrier at which all 8 warps wait, with 128 threads idle at the first level
//           and 255 at the last. step06 reduces within each warp by shuffles first.
// Run:      ./build/step05_vectorized/step05_vectorized   (--help for options)
#include <mutex>
#include <unordered_map>

#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step05_vectorized {

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
  // The row itself, cols + 3 floats (the launch sizes it); 16-byte aligned for float4 access.
  extern __shared__ __align__(16) float row_cache[];

  const int tid = threadIdx.x;
  // grid = rows, so each block owns exactly one row: the shared arrays never carry one row's
  // partials into the next.
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;

  // The row's 16-byte phase in x: how many floats its start lies past an aligned address. The
  // head is the 0..3 floats up to the next aligned address, the body the float4s after it.
  const int in_phase = static_cast<int>(reinterpret_cast<uintptr_t>(in) / sizeof(float) % 4);
  const int in_head = min((4 - in_phase) % 4, cols);
  const int in_body = (cols - in_head) / 4;
  // cache[c] holds in[c] at the same phase as in global memory (row_cache has 3 spare floats for
  // it), so the body's float4s land on aligned shared addresses as well.
  float* cache = row_cache + in_phase;

  // Pass 1: each thread's online (max, sum) over its elements; a warp's 32 threads read 32
  // neighbouring float4s per iteration, 512 contiguous bytes. Each element is also kept in
  // shared memory for pass 2.
  float max_val = -INFINITY;
  float sum = 0.f;
  if (tid < in_head) {
    const float v = in[tid];
    cache[tid] = v;
    online_update(max_val, sum, v);
  }
  // Only dereferenced when in_body > 0, and then in + in_head is 16-byte aligned.
  const float4* in4 = reinterpret_cast<const float4*>(in + in_head);
  float4* cache4 = reinterpret_cast<float4*>(cache + in_head);
  for (int i = tid; i < in_body; i += kThreads) {
    const float4 v = in4[i];
    cache4[i] = v;
    online_update(max_val, sum, v.x);
    online_update(max_val, sum, v.y);
    online_update(max_val, sum, v.z);
    online_update(max_val, sum, v.w);
  }
  const int in_tail = in_head + 4 * in_body + tid;
  if (in_tail < cols) {
    const float v = in[in_tail];
    cache[in_tail] = v;
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

  // Pass 2: normalise, reading the row from shared memory. The output is split by y's phase,
  // which may differ from x's, so a thread may read elements another thread wrote: the tree's
  // barriers above order those writes before these reads. An all -inf row has max -inf, so
  // exp(NaN) makes it NaN, as in torch.
  const float inv_sum = 1.f / sum;
  const int out_phase = static_cast<int>(reinterpret_cast<uintptr_t>(out) / sizeof(float) % 4);
  const int out_head = min((4 - out_phase) % 4, cols);
  const int out_body = (cols - out_head) / 4;
  if (tid < out_head) out[tid] = expf(cache[tid] - max_val) * inv_sum;
  float4* out4 = reinterpret_cast<float4*>(out + out_head);
  if (out_phase == in_phase) {
    // Same phase, so out_head == in_head and the shared side of the body is aligned too.
    const float4* src4 = reinterpret_cast<const float4*>(cache + out_head);
    for (int i = tid; i < out_body; i += kThreads) {
      const float4 v = src4[i];
      out4[i] = make_float4(expf(v.x - max_val) * inv_sum, expf(v.y - max_val) * inv_sum,
                            expf(v.z - max_val) * inv_sum, expf(v.w - max_val) * inv_sum);
    }
  } else {
    // x and y differ in phase: the four shared floats behind one aligned float4 of y do not
    // start on a 16-byte boundary, so they are read one by one.
    for (int i = tid; i < out_body; i += kThreads) {
      const float* src = cache + out_head + 4 * i;
      out4[i] = make_float4(expf(src[0] - max_val) * inv_sum, expf(src[1] - max_val) * inv_sum,
                            expf(src[2] - max_val) * inv_sum, expf(src[3] - max_val) * inv_sum);
    }
  }
  const int out_tail = out_head + 4 * out_body + tid;
  if (out_tail < cols) out[out_tail] = expf(cache[out_tail] - max_val) * inv_sum;
}

// The largest row the current device can cache: the opt-in shared memory per block less the
// kernel's static arrays (the tree's 2 KB) and the 3 floats of phase padding. A kernel may use
// more than 48 KB of dynamic shared memory only after opting in with cudaFuncSetAttribute; that
// is done here, once per device.
int max_cols() {
  static std::mutex mutex;
  static std::unordered_map<int, int> cols_by_device;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cols_by_device.find(device);
  if (found != cols_by_device.end()) return found->second;

  int optin_bytes = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, softmax_kernel));
  const int dynamic_bytes = optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
  CUDA_CHECK(cudaFuncSetAttribute(softmax_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  dynamic_bytes));
  const int cols = dynamic_bytes / static_cast<int>(sizeof(float)) - 3;
  cols_by_device.emplace(device, cols);
  return cols;
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  // Checks cols against max_cols() too (and max_cols() opts the kernel in to the shared memory).
  softmax::check_launch_args("step05_vectorized", x, y, rows, cols, max_cols());
  const size_t smem_bytes = (static_cast<size_t>(cols) + 3) * sizeof(float);
  // gridDim.x may be up to 2^31 - 1, so one block per row is a legal grid for any int rows.
  softmax_kernel<<<rows, kThreads, smem_bytes, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

softmax::Traffic traffic(int /*cols*/) { return {1, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step05_vectorized", "16-byte float4 loads and stores", launch,
                               max_cols, traffic};
  return s;
}

}  // namespace step05_vectorized
