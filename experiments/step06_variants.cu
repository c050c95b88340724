// SPDX-License-Identifier: MIT
// softmax_step06_variants: step06's side benchmark. It runs step05 and step06, both through the
// step table (their own launchers), beside alternative block reductions for step06 that live
// only in this file:
//   pairs     step06's first version: (max, sum) pairs merged in every warp, two butterflies in
//             all 8 warps, one barrier (the pitfall in docs/step06_warp_shuffle.md)
//   warp0     pairs, but only warp 0 merges the 8 warp pairs; a second barrier broadcasts them
//   lane8     pairs, but every lane reads part[lane % 8] and the second butterfly is xor 4, 2, 1
//   twopass   pass 1 only copies the row and takes the max (no expf); the sum comes from a second
//             pass over the shared copy; max and sum reduced as in step06
//   tp_cache  twopass, with the exps written back to shared memory: pass 2 only multiplies
// All keep step05's mapping (grid = rows, 256 threads, the row cached in shared memory at x's
// 16-byte phase, scalar head + float4 body + scalar tail) and accurate expf.
//
// Every kernel is verified at every N against the double-precision reference (common/verify.h),
// and on small shapes with non-finite rows and x/y off 16-byte boundaries (check_step, guard zones
// included); then timed with softmax::Timer, L2 flushed before each launch, interleaved round by
// round with a device-to-device memcpy of the same bytes. Printed: the ratio to memcpy and the
// speed-up over step05 per N (medians), median times and resident blocks per SM, and a summary
// against step06's target (>= 1.05x step05 at N <= 2048, >= 0.99x everywhere).
//
//   build/softmax_step06_variants                 # default N list, M = 4096
//   build/softmax_step06_variants 1024 4096       # these N only
//   build/softmax_step06_variants --grid          # N = 128*i, i = 2..128
//   (--rows M, --rounds R, --verify-rows V, --no-specials; --help)
// Exit code: 0 all verified, 1 a verification failure or an error, 2 bad usage, 77 no GPU.
//
// docs/results/step06_variants_h100.txt is a run of this program on an H100 (the columns as here:
// "step06" is today's step06, "pairs" its first version).
//
// Per row, in warp-level operations, counted from the code ("merge" = one (max, sum) merge:
// fmaxf, 2 compares, up to 2 expf, 2 products, an add; SHFL = __shfl_xor_sync; BAR =
// __syncthreads; expf = in the reduction, at most):
//   kernel    merges  SHFL  BAR  expf    kernel    merges  SHFL  BAR  expf
//   step05        12     0    9    24    lane8         64   128    1   128
//   step06         0   128    2     8    twopass        0   128    2     0
//   pairs         80   160    1   160    tp_cache       0   128    2     0
//   warp0         43    86    2    86
// expf per element outside the reduction: 3 (2 in pass 1, 1 in pass 2); twopass 2; tp_cache 1.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/data.h"
#include "common/device.h"
#include "common/device_buffer.h"
#include "common/reference.h"
#include "common/softmax.h"
#include "common/step_table.h"
#include "common/timer.h"
#include "common/verify.h"

// The kernels of step05 and step06, defined in their steps and launched only through the step
// table. Declared here to read their attributes (registers, shared memory) and to ask the
// occupancy calculator about them.
namespace step05_vectorized {
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols);
}
namespace step06_warp_shuffle {
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols);
}

namespace variants {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kWarps = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xffffffffu;

// online_update / rescale / merge: as in step05 (whose comments explain the non-finite cases).
__device__ __forceinline__ void online_update(float& max_val, float& sum, float v) {
  if (v == -INFINITY) return;
  const float new_max = fmaxf(max_val, v);
  sum = sum * expf(max_val - new_max) + expf(v - new_max);
  max_val = new_max;
}

__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : expf(part_max - max_val);
}

__device__ __forceinline__ void merge(float& max_val, float& sum, float other_max,
                                      float other_sum) {
  const float new_max = fmaxf(max_val, other_max);
  sum = __fadd_rn(sum * rescale(max_val, new_max), other_sum * rescale(other_max, new_max));
  max_val = new_max;
}

// (max, sum) butterfly over xor offsets kFirstOffset, kFirstOffset / 2, ..., 1.
template <int kFirstOffset>
__device__ __forceinline__ void merge_butterfly(float& max_val, float& sum) {
#pragma unroll
  for (int offset = kFirstOffset; offset > 0; offset /= 2) {
    const float other_max = __shfl_xor_sync(kFullMask, max_val, offset);
    const float other_sum = __shfl_xor_sync(kFullMask, sum, offset);
    merge(max_val, sum, other_max, other_sum);
  }
}

// Plain butterflies: fmaxf and + are commutative, so both lanes of each step get the same bits and
// every lane ends with the same value.
template <int kFirstOffset>
__device__ __forceinline__ float max_butterfly(float v) {
#pragma unroll
  for (int offset = kFirstOffset; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}
template <int kFirstOffset>
__device__ __forceinline__ float sum_butterfly(float v) {
#pragma unroll
  for (int offset = kFirstOffset; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Block-wide max / sum, as step06's block_max / block_sum: a 5-step butterfly in each warp, lane 0
// writes the warp's value, one barrier, then every lane reads part[lane % 8] (each group of 8
// lanes holds all 8 warp values) and a 3-step butterfly (xor 4, 2, 1) stays inside each group:
// every thread ends with the result. 8 shuffles and 8 fmaxf/add per warp, one barrier. `part`
// must not be reused before another barrier (the two reductions of a kernel use different arrays).
__device__ __forceinline__ float block_max(float v, float* part, int lane, int warp) {
  v = max_butterfly<kWarpSize / 2>(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  return max_butterfly<kWarps / 2>(part[lane % kWarps]);
}
__device__ __forceinline__ float block_sum(float v, float* part, int lane, int warp) {
  v = sum_butterfly<kWarpSize / 2>(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  return sum_butterfly<kWarps / 2>(part[lane % kWarps]);
}

// Pass 1 of step05/06: read the row (head, float4 body, tail) into shared memory at x's
// phase and fold each element into the thread's online (max, sum).
__device__ __forceinline__ void load_online(const float* in, float* cache, int cols, int in_head,
                                            int in_body, int tid, float& max_val, float& sum) {
  max_val = -INFINITY;
  sum = 0.f;
  if (tid < in_head) {
    const float v = in[tid];
    cache[tid] = v;
    online_update(max_val, sum, v);
  }
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
}

// Pass 2 of step05/06: y = expf(cache - max) * inv_sum, split by y's phase. Needs a
// barrier after the last write to the cache (another thread's elements are read when the phases
// differ).
__device__ __forceinline__ void store_exp(float* out, const float* cache, int cols, int in_phase,
                                          int tid, float max_val, float inv_sum) {
  const int out_phase = static_cast<int>(reinterpret_cast<uintptr_t>(out) / sizeof(float) % 4);
  const int out_head = min((4 - out_phase) % 4, cols);
  const int out_body = (cols - out_head) / 4;
  if (tid < out_head) out[tid] = expf(cache[tid] - max_val) * inv_sum;
  float4* out4 = reinterpret_cast<float4*>(out + out_head);
  if (out_phase == in_phase) {
    const float4* src4 = reinterpret_cast<const float4*>(cache + out_head);
    for (int i = tid; i < out_body; i += kThreads) {
      const float4 v = src4[i];
      out4[i] = make_float4(expf(v.x - max_val) * inv_sum, expf(v.y - max_val) * inv_sum,
                            expf(v.z - max_val) * inv_sum, expf(v.w - max_val) * inv_sum);
    }
  } else {
    for (int i = tid; i < out_body; i += kThreads) {
      const float* src = cache + out_head + 4 * i;
      out4[i] = make_float4(expf(src[0] - max_val) * inv_sum, expf(src[1] - max_val) * inv_sum,
                            expf(src[2] - max_val) * inv_sum, expf(src[3] - max_val) * inv_sum);
    }
  }
  const int out_tail = out_head + 4 * out_body + tid;
  if (out_tail < cols) out[out_tail] = expf(cache[out_tail] - max_val) * inv_sum;
}

// The row's x phase, head and body (as step05/06).
struct Split {
  int phase, head, body;
};
__device__ __forceinline__ Split split_row(const float* p, int cols) {
  Split s;
  s.phase = static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(float) % 4);
  s.head = min((4 - s.phase) % 4, cols);
  s.body = (cols - s.head) / 4;
  return s;
}

// ---- pairs: step06's first version, its kernel body as it was -----------------------------------
// Each warp merges its 32 (max, sum) pairs with a 5-step butterfly, lane 0 writes the warp's
// pair, one barrier, then every warp reads the 8 pairs (lanes 8..31 pad with (-inf, 0)) and runs
// the 5-step butterfly again: 10 merges per warp, 80 per row, each with 2 shuffles and up to
// 2 expf, against step05's 12.
__global__ void pairs_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                             int cols) {
  __shared__ float part_max[kWarps];
  __shared__ float part_sum[kWarps];
  extern __shared__ __align__(16) float row_cache[];

  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;

  const int in_phase = static_cast<int>(reinterpret_cast<uintptr_t>(in) / sizeof(float) % 4);
  const int in_head = min((4 - in_phase) % 4, cols);
  const int in_body = (cols - in_head) / 4;
  float* cache = row_cache + in_phase;

  float max_val = -INFINITY;
  float sum = 0.f;
  if (tid < in_head) {
    const float v = in[tid];
    cache[tid] = v;
    online_update(max_val, sum, v);
  }
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

  merge_butterfly<kWarpSize / 2>(max_val, sum);
  if (lane == 0) {
    part_max[tid / kWarpSize] = max_val;
    part_sum[tid / kWarpSize] = sum;
  }
  __syncthreads();
  max_val = lane < kWarps ? part_max[lane] : -INFINITY;
  sum = lane < kWarps ? part_sum[lane] : 0.f;
  merge_butterfly<kWarpSize / 2>(max_val, sum);

  const float inv_sum = 1.f / sum;
  const int out_phase = static_cast<int>(reinterpret_cast<uintptr_t>(out) / sizeof(float) % 4);
  const int out_head = min((4 - out_phase) % 4, cols);
  const int out_body = (cols - out_head) / 4;
  if (tid < out_head) out[tid] = expf(cache[tid] - max_val) * inv_sum;
  float4* out4 = reinterpret_cast<float4*>(out + out_head);
  if (out_phase == in_phase) {
    const float4* src4 = reinterpret_cast<const float4*>(cache + out_head);
    for (int i = tid; i < out_body; i += kThreads) {
      const float4 v = src4[i];
      out4[i] = make_float4(expf(v.x - max_val) * inv_sum, expf(v.y - max_val) * inv_sum,
                            expf(v.z - max_val) * inv_sum, expf(v.w - max_val) * inv_sum);
    }
  } else {
    for (int i = tid; i < out_body; i += kThreads) {
      const float* src = cache + out_head + 4 * i;
      out4[i] = make_float4(expf(src[0] - max_val) * inv_sum, expf(src[1] - max_val) * inv_sum,
                            expf(src[2] - max_val) * inv_sum, expf(src[3] - max_val) * inv_sum);
    }
  }
  const int out_tail = out_head + 4 * out_body + tid;
  if (out_tail < cols) out[out_tail] = expf(cache[out_tail] - max_val) * inv_sum;
}

// The kernels below carry __launch_bounds__(256, 8), which holds them at 32 registers, as step05
// and step06 (twopass and tp_cache would take 39 and 40, and 6 blocks per SM instead of 8 at
// short N); none spills.

// ---- warp0: pairs with warp 0 alone finishing: after the per-warp butterfly and the barrier,
// only warp 0 merges the 8 warp pairs (xor 4, 2, 1 over lanes 0..7), lane 0 writes the row's pair
// to shared memory, a second barrier, every thread reads it.
__global__ void __launch_bounds__(kThreads, 8)
    warp0_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float part_max[kWarps];
  __shared__ float part_sum[kWarps];
  __shared__ float row_max, row_sum;
  extern __shared__ __align__(16) float row_cache[];
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;
  const Split s = split_row(in, cols);
  float* cache = row_cache + s.phase;

  float max_val, sum;
  load_online(in, cache, cols, s.head, s.body, tid, max_val, sum);
  merge_butterfly<kWarpSize / 2>(max_val, sum);
  if (lane == 0) {
    part_max[warp] = max_val;
    part_sum[warp] = sum;
  }
  __syncthreads();
  if (warp == 0) {
    max_val = lane < kWarps ? part_max[lane] : -INFINITY;
    sum = lane < kWarps ? part_sum[lane] : 0.f;
    merge_butterfly<kWarps / 2>(max_val, sum);
    if (lane == 0) {
      row_max = max_val;
      row_sum = sum;
    }
  }
  __syncthreads();
  max_val = row_max;
  sum = row_sum;
  store_exp(out, cache, cols, s.phase, tid, max_val, 1.f / sum);
}

// ---- lane8: pairs with every lane reading part[lane % 8] and the second butterfly cut to
// xor 4, 2, 1: one barrier, as pairs, 3 merges per warp instead of 5 in the second stage.
__global__ void __launch_bounds__(kThreads, 8)
    lane8_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float part_max[kWarps];
  __shared__ float part_sum[kWarps];
  extern __shared__ __align__(16) float row_cache[];
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;
  const Split s = split_row(in, cols);
  float* cache = row_cache + s.phase;

  float max_val, sum;
  load_online(in, cache, cols, s.head, s.body, tid, max_val, sum);
  merge_butterfly<kWarpSize / 2>(max_val, sum);
  if (lane == 0) {
    part_max[warp] = max_val;
    part_sum[warp] = sum;
  }
  __syncthreads();
  max_val = part_max[lane % kWarps];
  sum = part_sum[lane % kWarps];
  merge_butterfly<kWarps / 2>(max_val, sum);
  store_exp(out, cache, cols, s.phase, tid, max_val, 1.f / sum);
}

// ---- twopass: pass 1 only copies the row to shared memory and takes the max (fmaxf, no expf);
// block_max; pass 1b re-reads the thread's own elements from shared memory and sums expf(v - max);
// block_sum; pass 2 as step05. 2 expf per element instead of 3, one more shared-memory read pass.
// Non-finite inputs: fmaxf ignores NaN, but expf(NaN - max) then makes the sum NaN; an all -inf
// row or a +inf max gives expf(NaN) = NaN in the sum: the whole row NaN, as torch.
__global__ void __launch_bounds__(kThreads, 8)
    twopass_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float part_max[kWarps];
  __shared__ float part_sum[kWarps];
  extern __shared__ __align__(16) float row_cache[];
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;
  const Split s = split_row(in, cols);
  float* cache = row_cache + s.phase;
  const float4* in4 = reinterpret_cast<const float4*>(in + s.head);
  float4* cache4 = reinterpret_cast<float4*>(cache + s.head);
  const int tail = s.head + 4 * s.body + tid;

  float max_val = -INFINITY;
  if (tid < s.head) {
    const float v = in[tid];
    cache[tid] = v;
    max_val = fmaxf(max_val, v);
  }
  for (int i = tid; i < s.body; i += kThreads) {
    const float4 v = in4[i];
    cache4[i] = v;
    max_val = fmaxf(max_val, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  if (tail < cols) {
    const float v = in[tail];
    cache[tail] = v;
    max_val = fmaxf(max_val, v);
  }
  max_val = block_max(max_val, part_max, lane, warp);

  // Each thread re-reads only the elements it wrote itself: no barrier needed for them.
  float sum = 0.f;
  if (tid < s.head) sum += expf(cache[tid] - max_val);
  for (int i = tid; i < s.body; i += kThreads) {
    const float4 v = cache4[i];
    sum +=
        (expf(v.x - max_val) + expf(v.y - max_val)) + (expf(v.z - max_val) + expf(v.w - max_val));
  }
  if (tail < cols) sum += expf(cache[tail] - max_val);
  sum = block_sum(sum, part_sum, lane, warp);

  store_exp(out, cache, cols, s.phase, tid, max_val, 1.f / sum);
}

// ---- tp_cache: twopass, but pass 1b writes each expf(v - max) back over v in shared
// memory and pass 2 only multiplies by 1/sum: 1 expf per element, one more shared-memory write
// pass. block_sum's barrier orders the written exps before pass 2 reads other threads' elements.
__global__ void __launch_bounds__(kThreads, 8)
    tp_cache_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float part_max[kWarps];
  __shared__ float part_sum[kWarps];
  extern __shared__ __align__(16) float row_cache[];
  const int tid = threadIdx.x;
  const int lane = tid % kWarpSize;
  const int warp = tid / kWarpSize;
  const int row = blockIdx.x;
  const float* in = x + static_cast<size_t>(row) * cols;
  float* out = y + static_cast<size_t>(row) * cols;
  const Split s = split_row(in, cols);
  float* cache = row_cache + s.phase;
  const float4* in4 = reinterpret_cast<const float4*>(in + s.head);
  float4* cache4 = reinterpret_cast<float4*>(cache + s.head);
  const int tail = s.head + 4 * s.body + tid;

  float max_val = -INFINITY;
  if (tid < s.head) {
    const float v = in[tid];
    cache[tid] = v;
    max_val = fmaxf(max_val, v);
  }
  for (int i = tid; i < s.body; i += kThreads) {
    const float4 v = in4[i];
    cache4[i] = v;
    max_val = fmaxf(max_val, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  if (tail < cols) {
    const float v = in[tail];
    cache[tail] = v;
    max_val = fmaxf(max_val, v);
  }
  max_val = block_max(max_val, part_max, lane, warp);

  float sum = 0.f;
  if (tid < s.head) {
    const float e = expf(cache[tid] - max_val);
    cache[tid] = e;
    sum += e;
  }
  for (int i = tid; i < s.body; i += kThreads) {
    const float4 v = cache4[i];
    const float4 e = make_float4(expf(v.x - max_val), expf(v.y - max_val), expf(v.z - max_val),
                                 expf(v.w - max_val));
    cache4[i] = e;
    sum += (e.x + e.y) + (e.z + e.w);
  }
  if (tail < cols) {
    const float e = expf(cache[tail] - max_val);
    cache[tail] = e;
    sum += e;
  }
  sum = block_sum(sum, part_sum, lane, warp);

  const float inv_sum = 1.f / sum;
  const int out_phase = static_cast<int>(reinterpret_cast<uintptr_t>(out) / sizeof(float) % 4);
  const int out_head = min((4 - out_phase) % 4, cols);
  const int out_body = (cols - out_head) / 4;
  if (tid < out_head) out[tid] = cache[tid] * inv_sum;
  float4* out4 = reinterpret_cast<float4*>(out + out_head);
  if (out_phase == s.phase) {
    const float4* src4 = reinterpret_cast<const float4*>(cache + out_head);
    for (int i = tid; i < out_body; i += kThreads) {
      const float4 v = src4[i];
      out4[i] = make_float4(v.x * inv_sum, v.y * inv_sum, v.z * inv_sum, v.w * inv_sum);
    }
  } else {
    for (int i = tid; i < out_body; i += kThreads) {
      const float* src = cache + out_head + 4 * i;
      out4[i] = make_float4(src[0] * inv_sum, src[1] * inv_sum, src[2] * inv_sum, src[3] * inv_sum);
    }
  }
  const int out_tail = out_head + 4 * out_body + tid;
  if (out_tail < cols) out[out_tail] = cache[out_tail] * inv_sum;
}

// ---- launchers with the step contract, so the harness treats the variants as steps ----------

using KernelFn = void (*)(const float*, float*, int, int);

size_t smem_bytes(int cols) { return (static_cast<size_t>(cols) + 3) * sizeof(float); }

// As step05/06's max_cols(): opt the kernel in to the largest dynamic shared memory the device
// allows and return the longest row that fits. Computed once: this program uses one device.
template <KernelFn K>
int max_cols() {
  static const int cols = [] {
    int device = 0, optin_bytes = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(
        cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cudaFuncAttributes attributes{};
    CUDA_CHECK(cudaFuncGetAttributes(&attributes, K));
    const int dynamic_bytes = optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
    CUDA_CHECK(cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_bytes));
    return dynamic_bytes / static_cast<int>(sizeof(float)) - 3;
  }();
  return cols;
}

// As step05/06's launch(): grid = rows, 256 threads, (cols + 3) floats of shared memory.
template <KernelFn K>
void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("softmax_step06_variants", x, y, rows, cols, max_cols<K>());
  K<<<rows, kThreads, smem_bytes(cols), stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

softmax::Traffic traffic(int /*cols*/) { return softmax::kIdealTraffic; }

}  // namespace variants

namespace {

// One column of the tables: a step (from the table, or a variant dressed as one) and its kernel.
struct Variant {
  const char* label;
  softmax::Step step;
  variants::KernelFn kernel;
};

const softmax::Step& table_step(const char* name) {
  if (const softmax::Step* s = softmax::find_step(name)) return *s;
  throw std::runtime_error(std::string("no step named ") + name + " in the step table");
}

template <variants::KernelFn K>
Variant variant(const char* label, const char* lesson) {
  return {label, {label, lesson, variants::launch<K>, variants::max_cols<K>, variants::traffic}, K};
}

std::vector<Variant> make_variants() {
  return {
      {"step05", table_step("step05_vectorized"), step05_vectorized::softmax_kernel},
      {"step06", table_step("step06_warp_shuffle"), step06_warp_shuffle::softmax_kernel},
      variant<variants::pairs_kernel>("pairs", "step06's first version: pair merges in 8 warps"),
      variant<variants::warp0_kernel>("warp0", "pairs, warp 0 merges the warp pairs"),
      variant<variants::lane8_kernel>("lane8", "pairs, second butterfly xor 4, 2, 1"),
      variant<variants::twopass_kernel>("twopass", "max pass without expf, then a sum pass"),
      variant<variants::tp_cache_kernel>("tp_cache", "twopass, exps kept in shared memory"),
  };
}

int blocks_per_sm(const Variant& v, int cols) {
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, variants::kThreads,
                                                           variants::smem_bytes(cols)));
  return blocks;
}

// Small shapes, every input kind with values that matter at a row's ends or are not finite, and
// placements with x or y off a 16-byte boundary; check_step poisons the output and checks guard
// zones around it.
bool check_specials(const std::vector<Variant>& vars) {
  const int rows = 24;
  const int cols_list[] = {1, 2, 3, 4, 5, 7, 31, 255, 256, 257, 781, 1025, 1031, 4099};
  const softmax::Placement placements[] = {{0, 0}, {1, 0}, {0, 1}, {3, 2}, {2, 2}};
  const softmax::InputKind kinds[] = {softmax::InputKind::kNonFinite,
                                      softmax::InputKind::kMaxAtEnds,
                                      softmax::InputKind::kOneFiniteAtEnds};
  bool ok = true;
  for (int cols : cols_list)
    for (const softmax::Placement& p : placements)
      for (softmax::InputKind kind : kinds) {
        const uint64_t seed = softmax::next_seed();
        for (const Variant& v : vars) {
          if (cols > v.step.max_cols()) continue;
          const softmax::VerifyResult r = softmax::check_step(v.step, rows, cols, kind, seed, p);
          if (!r.ok()) {
            std::printf("\n!!!!! FAIL !!!!! %s at %dx%d, x+%d y+%d floats, %s input: %s\n\n",
                        v.label, rows, cols, p.x_offset, p.y_offset, softmax::to_string(kind),
                        r.report().c_str());
            ok = false;
          }
        }
      }
  std::printf(
      "non-finite/phase/guard check: %zu N x %zu placements x %zu input kinds x %zu kernels: %s\n",
      std::size(cols_list), std::size(placements), std::size(kinds), vars.size(),
      ok ? "all ok" : "FAILURES (see above)");
  return ok;
}

struct Row {
  int n = 0;
  double memcpy_ms = 0;
  std::vector<double> ms;  // < 0: not run (N above the kernel's max_cols)
  std::vector<int> blocks;
  std::vector<bool> ok;
};

void print_tables(const std::vector<Variant>& vars, const std::vector<Row>& results, int rows) {
  const int nk = static_cast<int>(vars.size());
  std::printf(
      "\nratio to memcpy (median memcpy time / median kernel time); then speed-up over "
      "step05 (median step05 time / median time); '!' = failed verification\n");
  std::printf("%6s %8s |", "N", "memcpyGB");
  for (const Variant& v : vars) std::printf(" %8s", v.label);
  std::printf(" |");
  for (int j = 1; j < nk; ++j) std::printf(" %8s", vars[j].label);
  std::printf("\n");
  for (const Row& r : results) {
    std::printf("%6d %8.0f |", r.n, softmax::effective_gbps(rows, r.n, r.memcpy_ms));
    for (int j = 0; j < nk; ++j) {
      if (r.ms[j] < 0)
        std::printf(" %8s", "-");
      else
        std::printf(" %7.3f%c", r.memcpy_ms / r.ms[j], r.ok[j] ? ' ' : '!');
    }
    std::printf(" |");
    for (int j = 1; j < nk; ++j) {
      if (r.ms[j] < 0 || r.ms[0] < 0)
        std::printf(" %8s", "-");
      else
        std::printf(" %7.3f%c", r.ms[0] / r.ms[j], r.ok[j] ? ' ' : '!');
    }
    std::printf("\n");
  }

  std::printf(
      "\nmedian time in microseconds; then resident blocks per SM (occupancy calculator)\n");
  std::printf("%6s %8s |", "N", "memcpy");
  for (const Variant& v : vars) std::printf(" %8s", v.label);
  std::printf(" |");
  for (const Variant& v : vars) std::printf(" %8s", v.label);
  std::printf("\n");
  for (const Row& r : results) {
    std::printf("%6d %8.2f |", r.n, r.memcpy_ms * 1e3);
    for (int j = 0; j < nk; ++j) {
      if (r.ms[j] < 0)
        std::printf(" %8s", "-");
      else
        std::printf(" %8.2f", r.ms[j] * 1e3);
    }
    std::printf(" |");
    for (int j = 0; j < nk; ++j) std::printf(" %8d", r.blocks[j]);
    std::printf("\n");
  }

  std::printf(
      "\nspeed-up over step05, over the N above: min at N <= 2048 / min overall (at N) / "
      "geometric mean; target: >= 1.05 at N <= 2048 and >= 0.99 everywhere\n");
  for (int j = 1; j < nk; ++j) {
    double min_small = 1e30, min_all = 1e30, log_sum = 0;
    int at = 0, count = 0;
    bool ok = true;
    for (const Row& r : results) {
      if (r.ms[j] < 0 || r.ms[0] < 0) continue;
      const double speedup = r.ms[0] / r.ms[j];
      if (r.n <= 2048) min_small = std::min(min_small, speedup);
      if (speedup < min_all) {
        min_all = speedup;
        at = r.n;
      }
      log_sum += std::log(speedup);
      ++count;
      ok = ok && r.ok[j];
    }
    if (count == 0) continue;
    const bool small_met = min_small >= 1.05 || min_small == 1e30;
    const bool all_met = min_all >= 0.99;
    std::printf("  %-9s %6.3f / %6.3f (N=%d) / %6.3f   %s%s\n", vars[j].label,
                min_small == 1e30 ? 0.0 : min_small, min_all, at, std::exp(log_sum / count),
                small_met && all_met ? "meets target" : "misses target",
                ok ? "" : "   VERIFICATION FAILED");
  }
}

void usage(const char* program) {
  std::printf(
      "usage: %s [N ...] [--grid] [--rows M] [--rounds R] [--verify-rows V] [--no-specials]\n"
      "  N ...            row lengths to run (default: 256 512 768 1024 1536 2048 3072 4096 6144\n"
      "                   8192 12288 16384 1025 2051 4097)\n"
      "  --grid           N = 128*i, i = 2..128, instead\n"
      "  --rows M         rows (default 4096)\n"
      "  --rounds R       timed rounds per N (default 30)\n"
      "  --verify-rows V  verify the first V rows of each N (default: all; 1024 with --grid)\n"
      "  --no-specials    skip the non-finite / phase / guard-zone check on small shapes\n",
      program);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ns;
  int rows = softmax::kSweepRows, rounds = 30, verify_rows = -1;
  bool grid = false, specials = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool takes_value = a == "--rows" || a == "--rounds" || a == "--verify-rows";
    if (takes_value && i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", argv[0], a.c_str());
      return 2;
    }
    if (a == "--grid") {
      grid = true;
    } else if (a == "--rows") {
      rows = std::atoi(argv[++i]);
    } else if (a == "--rounds") {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--verify-rows") {
      verify_rows = std::atoi(argv[++i]);
    } else if (a == "--no-specials") {
      specials = false;
    } else if (a == "--help" || a == "-h") {
      usage(argv[0]);
      return 0;
    } else {
      char* end = nullptr;
      const long v = std::strtol(a.c_str(), &end, 10);
      if (end == a.c_str() || *end != '\0' || v < 1 || v > (1 << 24)) {
        std::fprintf(stderr, "%s: bad argument '%s'\n", argv[0], a.c_str());
        usage(argv[0]);
        return 2;
      }
      ns.push_back(static_cast<int>(v));
    }
  }
  if (rows < 1 || rounds < 1) {
    std::fprintf(stderr, "%s: --rows and --rounds must be >= 1\n", argv[0]);
    return 2;
  }
  if (grid)
    for (int i = 2; i <= 128; ++i) ns.push_back(128 * i);
  if (ns.empty())
    ns = {256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 1025, 2051, 4097};
  if (verify_rows < 0) verify_rows = grid ? 1024 : rows;
  verify_rows = std::min(verify_rows, rows);

  if (!softmax::require_gpu(argv[0])) return softmax::kExitNoGpu;

  try {
    std::printf("%s\n", softmax::query_device().summary().c_str());
    const std::vector<Variant> vars = make_variants();
    std::printf("kernels (registers / static shared bytes / local bytes / max cols):");
    for (const Variant& v : vars) {
      const int max_cols = v.step.max_cols();  // opts the kernel in to its shared memory first
      cudaFuncAttributes a{};
      CUDA_CHECK(cudaFuncGetAttributes(&a, v.kernel));
      std::printf("  %s %d/%zu/%zu/%d", v.label, a.numRegs, a.sharedSizeBytes, a.localSizeBytes,
                  max_cols);
    }
    std::printf(
        "\nM = %d rows, %d timed rounds per N (medians), L2 flushed before each timed launch, "
        "memcpy interleaved; verified rows per N: %d\n",
        rows, rounds, verify_rows);
    std::fflush(stdout);

    bool all_ok = true;
    if (specials) all_ok = check_specials(vars) && all_ok;

    softmax::Timer timer;
    const int nk = static_cast<int>(vars.size());
    std::vector<Row> results;
    for (int n : ns) {
      const size_t count = static_cast<size_t>(rows) * n;
      const size_t bytes = count * sizeof(float);
      const std::vector<float> x = softmax::make_input(rows, n, softmax::next_seed());
      const std::vector<float> x_verified(x.begin(),
                                          x.begin() + static_cast<size_t>(verify_rows) * n);
      const std::vector<double> ref = softmax::reference_softmax(x_verified, verify_rows, n);
      softmax::DeviceBuffer<float> d_x(count), d_y(count), d_copy(count);
      CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), bytes, cudaMemcpyHostToDevice));
      const float* dx = d_x.get();
      float* dy = d_y.get();

      Row row;
      row.n = n;
      row.ms.assign(nk, -1);
      row.blocks.assign(nk, 0);
      row.ok.assign(nk, true);
      std::vector<softmax::Timer::Enqueue> enqueues = {
          softmax::Timer::memcpy_enqueue(d_copy.get(), dx, bytes)};
      std::vector<int> column = {-1};  // enqueue -> column of the tables; -1: the memcpy
      std::vector<float> y(x_verified.size());
      for (int j = 0; j < nk; ++j) {
        const softmax::Step step = vars[j].step;
        if (n > step.max_cols()) continue;
        row.blocks[j] = blocks_per_sm(vars[j], n);
        CUDA_CHECK(cudaMemset(dy, softmax::kPoisonByte, bytes));
        step.launch(dx, dy, rows, n, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
        const softmax::VerifyResult r = softmax::verify(y, ref, verify_rows, n);
        if (!r.ok()) {
          std::printf("\n!!!!! FAIL !!!!! %s at %dx%d (first %d rows verified): %s\n\n",
                      vars[j].label, rows, n, verify_rows, r.report().c_str());
          row.ok[j] = false;
          all_ok = false;
        }
        enqueues.push_back([=](cudaStream_t s) { step.launch(dx, dy, rows, n, s); });
        column.push_back(j);
      }
      const std::vector<softmax::Timing> t = timer.time_interleaved(enqueues, rounds);
      for (size_t i = 0; i < t.size(); ++i) {
        if (column[i] < 0)
          row.memcpy_ms = t[i].median_ms;
        else
          row.ms[column[i]] = t[i].median_ms;
      }
      results.push_back(row);
      std::fprintf(stderr, "N = %d done\n", n);
    }

    print_tables(vars, results, rows);
    std::printf("\n%s\n", all_ok ? "verification: all kernels ok at every N"
                                 : "!!!!! verification: FAILURES, see above !!!!!");
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
