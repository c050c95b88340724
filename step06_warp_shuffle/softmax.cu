// SPDX-License-Identifier: MIT
// step06_warp_shuffle: step05 with the block reduction done by warp shuffles.
//
// What changed: the 8-level shared-memory tree (9 barriers, a shared round trip per level) goes.
//   Pass 1 is step05's, so each thread still ends it with an online (max, sum). The block then
//   reduces the two halves of that pair separately, each with plain shuffles: the row max by
//   fmaxf (a 5-step butterfly in every warp, one value per warp through shared memory, a barrier,
//   a 3-step butterfly over the 8 warp values), then every thread moves its own sum onto the row
//   max (one expf), then the row sum the same way with adds. Every thread ends with the row's max
//   and sum, 2 barriers in all. Pass 2 is step05's.
//   A first version merging (max, sum) pairs in every warp was slower: docs/step06_warp_shuffle.md
// Mapping:  grid = rows, blockDim = 256 = 8 warps; block -> one row; thread t -> float4 t,
//           t+256, ... of the body, as step05.
// Traffic:  reads 1 per element, writes 1: 8*M*N bytes modeled (as step05).
// Limit:    the mapping is one size for all rows: 256 threads per row whatever N is (a 256-column
//           row leaves 192 of them idle), one block per row, born and retired per row, the row
//           waits in shared memory, and N is capped by shared memory. step07 sizes the mapping
//           to N, keeps short rows in registers and makes its blocks persistent.
// Run:      ./build/step06_warp_shuffle/step06_warp_shuffle   (--help for options)
#include <mutex>
#include <unordered_map>

#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step06_warp_shuffle {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xffffffffu;

// Folds one element into the running (max, sum). A -inf element contributes exactly 0 whatever
// the max, so it is skipped: folding it while the max is still -inf would compute
// exp(-inf - -inf) = NaN and poison a row that torch.softmax handles.
__device__ __forceinline__ void online_update(float& max_val, float& sum, float v) {
  if (v == -INFINITY) return;
  const float new_max = fmaxf(max_val, v);
  sum = sum * expf(max_val - new_max) + expf(v - new_max);
  max_val = new_max;
}

// exp(part_max - max_val), the factor that moves a thread's sum onto the row max. Equal maxima
// give 1 even when both are infinite: a thread that saw only -inf (sum 0) or a NaN (sum NaN)
// keeps 0 or NaN, never exp(-inf - -inf) = NaN. A +inf row max needs no care: the thread that saw
// the +inf already has sum NaN (from exp(inf - inf)), and the row sum keeps it.
__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : expf(part_max - max_val);
}

// Butterflies over one value: at each step lane l combines its value with lane l ^ offset's, for
// offset = kFirstOffset, ..., 2, 1. fmaxf and + are commutative, so both lanes of a step get the
// same bits, and after the last step all 2 * kFirstOffset lanes of a group hold the group's
// result (a tree would leave it in one lane and need a broadcast).
template <int kFirstOffset>
__device__ __forceinline__ float butterfly_max(float v) {
#pragma unroll
  for (int offset = kFirstOffset; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

template <int kFirstOffset>
__device__ __forceinline__ float butterfly_sum(float v) {
#pragma unroll
  for (int offset = kFirstOffset; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The block's max of v, returned to every thread: a 5-step butterfly in each warp (xor 16 .. 1),
// lane 0 leaves its warp's max in part[warp], one barrier, then every lane reads part[lane % 8],
// so each group of 8 lanes holds all 8 warp maxima, and a 3-step butterfly (xor 4, 2, 1)
// finishes. 8 shuffles per warp. `part` is still being read after the call: the next reduction
// must use another array.
__device__ __forceinline__ float block_max(float v, float* part) {
  const int lane = threadIdx.x % kWarpSize;
  v = butterfly_max<kWarpSize / 2>(v);
  if (lane == 0) part[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  return butterfly_max<kWarps / 2>(part[lane % kWarps]);
}

// The block's sum of v, returned to every thread, the same way with adds.
__device__ __forceinline__ float block_sum(float v, float* part) {
  const int lane = threadIdx.x % kWarpSize;
  v = butterfly_sum<kWarpSize / 2>(v);
  if (lane == 0) part[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  return butterfly_sum<kWarps / 2>(part[lane % kWarps]);
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols) {
  // One value per warp: the warp maxima, then the warp sums (separate arrays, so that no warp
  // writes its sum over a maximum that another warp has yet to read).
  __shared__ float part_max[kWarps];
  __shared__ float part_sum[kWarps];
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

  // The row max: every thread's max, reduced over the block by fmaxf shuffles. A thread with no
  // elements (short rows) holds -inf, which changes nothing.
  const float row_max = block_max(max_val, part_max);
  // Each thread moves its own sum onto the row max: one rescale, the reduction's only expf
  // (skipped when the thread's max is the row's). A thread with no elements holds (-inf, 0) and
  // adds 0. __fmul_rn keeps the product from being fused into the first add of the butterfly,
  // so the two lanes of that step add the same two rounded numbers.
  sum = __fmul_rn(sum, rescale(max_val, row_max));
  // The row sum, by add shuffles. Every thread ends with the same bits of the row's max and sum.
  sum = block_sum(sum, part_sum);
  max_val = row_max;

  // Pass 2: normalise, reading the row from shared memory. The output is split by y's phase,
  // which may differ from x's, so a thread may read elements another thread wrote: the
  // reduction's barriers above order those writes before these reads. An all -inf row has max
  // -inf, so exp(NaN) makes it NaN, as in torch.
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
// kernel's static arrays (8 warp maxima and 8 warp sums, 64 bytes) and the 3 floats of phase
// padding. A kernel may use more than 48 KB of dynamic shared memory only after opting in with
// cudaFuncSetAttribute; that is done here, once per device.
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
  softmax::check_launch_args("step06_warp_shuffle", x, y, rows, cols, max_cols());
  const size_t smem_bytes = (static_cast<size_t>(cols) + 3) * sizeof(float);
  // gridDim.x may be up to 2^31 - 1, so one block per row is a legal grid for any int rows.
  softmax_kernel<<<rows, kThreads, smem_bytes, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

softmax::Traffic traffic(int /*cols*/) { return {1, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step06_warp_shuffle",
                               "block reduction by warp shuffles: two barriers instead of nine",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step06_warp_shuffle
