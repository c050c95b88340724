// SPDX-License-Identifier: MIT
// step07_persistent: persistent kernels, a mapping sized to the row, rows held in registers.
//
// What changed: step06 gives every row one 256-thread block that parks the row in shared memory.
//   Here the launcher picks the mapping by row length N, and the kernels are persistent: the grid
//   is what the GPU holds at once (SMs x resident blocks per SM, from the occupancy calculator),
//   balanced so every block gets the same number of rows, and its blocks loop over the rows. One
//   path, (c), measured faster with one block per row, and keeps that.
//   (a) N <= 128:   sub-warp groups; a row gets 1, 2, 4, 8, 16 or 32 lanes, one float4 each, so
//                   a warp holds 32..1 rows and no lane idles for short rows.
//   (b) N <= 2048:  a warp per row, held in registers: each lane issues all of its (up to 16)
//                   float4 loads before using any, the max and the sum go through shuffles, the
//                   exponentials stay in registers for the store. No shared memory, no barrier,
//                   one exp per element. Up to 12 float4 per lane (but 4) a warp takes two rows
//                   or more and issues the next row's loads before it reduces the current one.
//   (c) N <= 16K:   a block per row held in registers (128 or 256 threads, 5..16 float4 each),
//                   one block per row rather than a persistent grid: the measured exception.
//   (c') N <= ~29K: a block per row, the block's rows double-buffered in shared memory with
//                   cp.async, so the next row streams in while this one is normalised.
//   (c'') N <= ~58K (all that fits once in shared memory on an H100), and all scalar rows
//                   beyond path (b): a block per row, one shared-memory buffer.
//   (d) longer rows: a block per row in two passes over global memory (online max and sum, then
//                   normalise), so every N >= 1 works: max_cols() is kNoColLimit.
//   The float4 versions need cols % 4 == 0 and 16-byte aligned x and y (then every row start is
//   aligned); otherwise the same mappings run with scalar accesses, (b) up to N = 1024.
// Fast math: exponentials use the __expf intrinsic (exp_ below), not expf; its error stays
//   inside the 1e-5 tolerance. -DSTEP07_ACCURATE_EXP switches back. No other fast-math.
// Mapping:  (a) lane -> float4 of a row, group of g lanes -> row; (b) warp -> row, lane -> float4
//           lane + 32k; (c), (d) block -> row, thread -> float4 t + kThreads*k. All grid-stride.
// Traffic:  (a)-(c'') read 1 and write 1 per element, 8*M*N bytes, the ideal. (d) reads twice,
//           12*M*N bytes modeled (rows that long are re-read mostly from L2).
// Limit:    DRAM bandwidth: 0.95-1.05 of a device-to-device memcpy over N = 256..16K on an H100
//           (docs/notes/step07.md has the tuning log). Left: fixed latency at tiny matrices.
// Run:      ./build/step07_persistent/step07_persistent   (--help for options)
#include <cuda_pipeline_primitives.h>

#include "common/cuda_check.h"
#include "common/softmax.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace step07_persistent {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Paths (a) and (b): 4 independent warps per block; small blocks pack the SMs evenly.
#ifndef STEP07_WARP_PATH_THREADS
#define STEP07_WARP_PATH_THREADS 128
#endif
constexpr int kWarpPathThreads = STEP07_WARP_PATH_THREADS;
// Path (b): at most 16 float4 (64 floats, 64 registers) per lane, so N <= 2048; the scalar
// version holds at most 32 floats per lane, so N <= 1024.
// STEP07_MAX_VEC_PACKS can be set at compile time to move the (b)/(c) boundary in experiments.
#ifndef STEP07_MAX_VEC_PACKS
#define STEP07_MAX_VEC_PACKS 16
#endif
constexpr int kMaxVecPacks = STEP07_MAX_VEC_PACKS;
constexpr int kMaxScalarPacks = 32;
// Paths (c) and (d): each thread loads this many items (float4 or float) before using any.
constexpr int kBatch = 8;
constexpr int kTwoPassThreads = 512;
// Path (c), float4: float4 per thread held in registers after the shared-memory stage.
#ifndef STEP07_PIPE_PACKS
#define STEP07_PIPE_PACKS 8
#endif
constexpr int kPipePacks = STEP07_PIPE_PACKS;
// Path (c'): shared-memory buffers per block (the kernel takes any count; three measured no
// better than two, docs/notes/step07.md).
constexpr int kPipeStages = 2;
// Path (c), float4: rows longer than this, up to 16K columns, are held in registers by a block,
// one block per row (measured best from 2K up: docs/notes/step07.md, change 7).
#ifndef STEP07_REGISTER_BLOCK_FROM
#define STEP07_REGISTER_BLOCK_FROM 2048
#endif
constexpr int kRegisterBlockFrom = STEP07_REGISTER_BLOCK_FROM;

// The exponential every path uses. By default the hardware approximation __expf: exp2 of
// x*log2(e) on the special-function unit, two instructions instead of the dozen or so of an
// accurate expf. Its error is at most 2 + 1.17*|x| ulp (CUDA programming guide), i.e. under
// 1e-6 relative where exp(x - max) >= 1e-3 and under 7e-6 down to x = -100, inside the 1e-5
// tolerance; -inf gives 0 and NaN stays NaN. -DSTEP07_ACCURATE_EXP restores expf.
__device__ __forceinline__ float exp_(float x) {
#ifdef STEP07_ACCURATE_EXP
  return expf(x);
#else
  return __expf(x);
#endif
}

// exp(part_max - max_val), the factor that moves a partial sum onto a larger max. Equal maxima
// give 1 even when both are infinite: two partials that saw only -inf (sum 0) or only NaN
// (sum NaN) merge to 0 or NaN, never to exp(-inf - -inf) = NaN. A +inf max needs no care: the
// partial that saw the +inf already has sum NaN (from exp(inf - inf)), and the merge keeps it.
__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : exp_(part_max - max_val);
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

// Butterfly: at each step lane l merges with lane l ^ offset, so after log2(32) = 5 steps every
// lane has merged all 32 partials (a tree reduction would leave the result in lane 0 only and
// need a broadcast).
__device__ __forceinline__ void warp_reduce(float& max_val, float& sum) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_max = __shfl_xor_sync(kFullMask, max_val, offset);
    const float other_sum = __shfl_xor_sync(kFullMask, sum, offset);
    merge(max_val, sum, other_max, other_sum);
  }
}

// step06's block reduction: shuffles within each warp, one pair per warp through shared memory,
// one barrier, and a second butterfly that leaves the row's pair in every thread. A persistent
// block reduces once per row, so warp_pairs alternates between two slots by row parity: a warp
// that races ahead to the next row writes the other slot, never the one a slower warp may still
// be reading (it cannot get two rows ahead: that needs the next row's barrier, which waits for
// the slow warp).
template <int kThreads>
__device__ __forceinline__ void block_reduce(float& max_val, float& sum, float2* warp_pairs) {
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  warp_reduce(max_val, sum);
  if (lane == 0) warp_pairs[threadIdx.x / kWarpSize] = make_float2(max_val, sum);
  __syncthreads();
  const float2 pair = lane < kWarps ? warp_pairs[lane] : make_float2(-INFINITY, 0.f);
  max_val = pair.x;
  sum = pair.y;
  warp_reduce(max_val, sum);
}

// Block-wide max and sum for a block whose threads hold their part of the row in registers
// (path (c)): the max first, exactly, then the exponentials against it, then the sum. Each is a
// butterfly in every warp, one value per warp through shared memory, one barrier, and a butterfly
// over the kWarps values (each group of kWarps lanes reads all of them, so every lane ends with
// the result). Plain fmaxf and add: cheaper than merging (max, sum) pairs, which needs two
// exponentials per step. Two barriers per row; the max slots are safe to rewrite at the next row
// because every warp passes the sum's barrier after reading them, and vice versa.
template <int kThreads, bool kMax>
__device__ __forceinline__ float block_all_reduce(float v, float* slots) {
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  if (lane == 0) slots[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  v = slots[lane % kWarps];
#pragma unroll
  for (int offset = kWarps / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  return v;
}

// The row-in-registers softmax of a block, shared by paths (c) and (c'): thread t takes float4
// t, t + kThreads, ... (kPacks of them at most; `src` and `dst` point at its first, `left` is
// the number of float4 from there to the row's end), all loaded before any is used, then the
// row's max, one exp per element against it, the row's sum, the store. fmaxf skips a NaN, but the
// NaN reaches the sum through exp; a +inf gives exp(inf - inf) = NaN; a row of only -inf has max
// -inf and exp(NaN): all three rows come out NaN, as in torch. Padding is -inf and adds 0.
template <int kThreads, int kPacks>
__device__ __forceinline__ void softmax_row_in_registers(const float4* src, float4* dst, int left,
                                                         float* reduce_max, float* reduce_sum) {
  float v[kPacks][4];
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    if (p * kThreads < left) {
      const float4 t = src[p * kThreads];
      v[p][0] = t.x;
      v[p][1] = t.y;
      v[p][2] = t.z;
      v[p][3] = t.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[p][j] = -INFINITY;
    }
  }
  float max_val = -INFINITY;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
#pragma unroll
    for (int j = 0; j < 4; ++j) max_val = fmaxf(max_val, v[p][j]);
  }
  max_val = block_all_reduce<kThreads, true>(max_val, reduce_max);
  float sum = 0.f;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[p][j] = exp_(v[p][j] - max_val);
      sum += v[p][j];
    }
  }
  sum = block_all_reduce<kThreads, false>(sum, reduce_sum);
  const float scale = 1.f / sum;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    if (p * kThreads < left)
      dst[p * kThreads] =
          make_float4(v[p][0] * scale, v[p][1] * scale, v[p][2] * scale, v[p][3] * scale);
  }
}

// One item is kVec consecutive floats: a float4 (one 16-byte access) or a single float. The
// arrays are indexed with compile-time constants only, so they live in registers.
template <int kVec>
__device__ __forceinline__ void load_item(const float* p, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
    v[0] = *p;
  }
}

template <int kVec>
__device__ __forceinline__ void store_item(float* p, const float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}

// The resident blocks per SM that paths (a) and (b) ask ptxas to allow for: each lane needs a
// register per float of its share of the row plus about 24 for addresses, indices and sums, out
// of 64K registers per SM. Left to itself, ptxas picked too small a budget at 12 float4 per
// lane and spilled; this gives it just enough, and no more, so occupancy stays as high as the
// row allows.
constexpr int warp_min_blocks(int floats_per_lane) {
  const int blocks = 65536 / (kWarpPathThreads * (floats_per_lane + 24));
  return blocks < 16 ? blocks : 16;
}

// Loads a group's share of a row into registers, kPacks items per lane: item p of this lane is
// at the compile-time offset p*kGroup*kVec from `in` (this lane's first column) and is in the row
// when that offset is below `remaining`, the columns from there to the row's end (<= 0 for a row
// past the end, which loads nothing). One base pointer with constant offsets keeps the address
// arithmetic out of the registers the row needs. With kVec == 4, cols % 4 == 0, so a float4 that
// starts in the row ends in it. Padding is -inf: it adds nothing to the max and
// exp(-inf - max) = 0 to the sum.
template <int kGroup, int kPacks, int kVec>
__device__ __forceinline__ void load_group_row(const float* in, int remaining,
                                               float (&v)[kPacks][kVec]) {
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    if (p * kGroup * kVec < remaining) {
      load_item<kVec>(in + p * kGroup * kVec, v[p]);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[p][j] = -INFINITY;
    }
  }
}

// The softmax of a row a group of kGroup lanes holds in registers (as load_group_row left it),
// stored to `out` (this lane's first column). All lanes of the warp must call it together: the
// shuffles stay inside each group (xor offsets < kGroup).
template <int kGroup, int kPacks, int kVec>
__device__ __forceinline__ void softmax_group_row(float (&v)[kPacks][kVec], float* out,
                                                  int remaining) {
  // The max first, exactly: the row is in registers, so no online rescaling is needed. fmaxf
  // skips NaN, but a NaN still reaches the sum through exp below and makes the row NaN.
  float max_val = -INFINITY;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) max_val = fmaxf(max_val, v[p][j]);
  }
#pragma unroll
  for (int offset = kGroup / 2; offset > 0; offset /= 2)
    max_val = fmaxf(max_val, __shfl_xor_sync(kFullMask, max_val, offset));

  // exp once per element, kept in place for the store. With max -inf (an all -inf row) this is
  // exp(NaN): the row comes out NaN, as in torch; a +inf gives exp(inf - inf) = NaN likewise.
  float sum = 0.f;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      v[p][j] = exp_(v[p][j] - max_val);
      sum += v[p][j];
    }
  }
  // a + b and b + a round alike, so every lane of the group ends with the same sum.
#pragma unroll
  for (int offset = kGroup / 2; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(kFullMask, sum, offset);

  const float inv_sum = 1.f / sum;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    if (p * kGroup * kVec < remaining) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[p][j] *= inv_sum;
      store_item<kVec>(out + p * kGroup * kVec, v[p]);
    }
  }
}

// Paths (a) and (b): a group of kGroup lanes owns a row and holds it in registers, kPacks items
// per lane; item p of lane l is columns (p*kGroup + l)*kVec onwards, so each pack of the group is
// one contiguous, coalesced access. The whole row is loaded before any of it is used: kPacks
// independent loads per lane in flight.
template <int kGroup, int kPacks, int kVec>
__global__ void __launch_bounds__(kWarpPathThreads, warp_min_blocks(kPacks * kVec))
    warp_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  constexpr int kRowsPerWarp = kWarpSize / kGroup;
  constexpr int kWarpsPerBlock = kWarpPathThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int group = lane / kGroup;       // which of the warp's rows
  const int first_col = (lane % kGroup) * kVec;

  // The loop runs over warp-uniform row bases, so all 32 lanes reach every shuffle; a group whose
  // row is past the end still takes part, padded with -inf, and loads and stores nothing.
  const int64_t warp_id = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t row_stride = int64_t(gridDim.x) * kWarpsPerBlock * kRowsPerWarp;
  for (int64_t base = warp_id * kRowsPerWarp; base < rows; base += row_stride) {
    const int64_t row = base + group;
    const int remaining = row < rows ? cols - first_col : 0;
    const size_t offset = static_cast<size_t>(row) * cols + first_col;
    float v[kPacks][kVec];
    load_group_row<kGroup, kPacks, kVec>(x + offset, remaining, v);
    softmax_group_row<kGroup, kPacks, kVec>(v, y + offset, remaining);
  }
}

// Path (b), float4 rows of 2-12 float4 per lane (except 4, see launch_warp_vec): the warp kernel
// with the next row in flight. A warp handles at least two rows (the launcher asks for two
// rounds); it issues the loads of its next row before it reduces the current one, so the
// reduction, the exponentials and the stores of one row overlap the next row's memory latency,
// and a row is stored as soon as it is done instead of all rows waiting in one wave. Twice the
// registers of warp_kernel (two rows per lane: 38-127 registers), no spills.
template <int kPacks>
__global__ void __launch_bounds__(kWarpPathThreads)
    warp_prefetch_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  constexpr int kWarpsPerBlock = kWarpPathThreads / kWarpSize;
  const int first_col = (threadIdx.x % kWarpSize) * 4;
  const int64_t warp_id = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t row_stride = int64_t(gridDim.x) * kWarpsPerBlock;
  const auto remaining = [&](int64_t row) { return row < rows ? cols - first_col : 0; };
  const auto offset = [&](int64_t row) { return static_cast<size_t>(row) * cols + first_col; };

  float v[kPacks][4], next[kPacks][4];
  load_group_row<kWarpSize, kPacks, 4>(x + offset(warp_id), remaining(warp_id), v);
  for (int64_t row = warp_id; row < rows; row += row_stride) {
    const int64_t next_row = row + row_stride;  // past the end: loads nothing
    load_group_row<kWarpSize, kPacks, 4>(x + offset(next_row), remaining(next_row), next);
    softmax_group_row<kWarpSize, kPacks, 4>(v, y + offset(row), remaining(row));
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[p][j] = next[p][j];
    }
  }
}

// Path (c): a block per row, the row cached in shared memory (cols floats). The launch bounds ask
// for 1024 resident threads per SM (at most 64 registers), so at least two blocks share an SM
// and one can load while the other waits at its barrier. Thread t owns items
// t, t + kThreads, ...; it is the only thread that writes or reads them in shared memory, so the
// cache needs no barrier, not even between rows.
template <int kThreads, int kVec>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    block_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float2 warp_pairs[2][kThreads / kWarpSize];
  extern __shared__ __align__(16) float row_cache[];
  const int tid = threadIdx.x;
  const int items = cols / kVec;  // exact: kVec == 4 only when cols % 4 == 0

  int parity = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const float* in = x + static_cast<size_t>(row) * cols;
    float* out = y + static_cast<size_t>(row) * cols;

    // Pass 1, from DRAM: in batches of kBatch items per thread, all loads of a batch issued
    // before the first is used (one batch covers a row of kThreads * kBatch items, 16K floats at
    // 512 threads). Each item goes to shared memory, and into the thread's max.
    // Item first + k*kThreads sits at a compile-time offset from item first, and is in the row
    // when k*kThreads < items - first: one pointer and one bound per batch, not eight.
    float max_val = -INFINITY;
    for (int first = tid; first < items; first += kThreads * kBatch) {
      const int left = items - first;
      const float* src = in + static_cast<size_t>(first) * kVec;
      float* cached = row_cache + static_cast<size_t>(first) * kVec;
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (k * kThreads < left) load_item<kVec>(src + k * kThreads * kVec, v[k]);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (k * kThreads < left) {
          store_item<kVec>(cached + k * kThreads * kVec, v[k]);
#pragma unroll
          for (int j = 0; j < kVec; ++j) max_val = fmaxf(max_val, v[k][j]);
        }
      }
    }

    // The thread's sum against its own max, from shared memory. A -inf element adds exactly 0;
    // it is skipped because with a thread max of -inf it would add exp(-inf - -inf) = NaN.
    float sum = 0.f;
    for (int i = tid; i < items; i += kThreads) {
      float v[kVec];
      load_item<kVec>(row_cache + static_cast<size_t>(i) * kVec, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) sum += v[j] == -INFINITY ? 0.f : exp_(v[j] - max_val);
    }

    // One (max, sum) pair per thread, merged across the block: one barrier per row.
    block_reduce<kThreads>(max_val, sum, warp_pairs[parity]);

    // Pass 2, from shared memory to DRAM. An all -inf row has max -inf, so exp(NaN) makes it NaN,
    // as in torch.
    const float inv_sum = 1.f / sum;
    for (int i = tid; i < items; i += kThreads) {
      float v[kVec];
      load_item<kVec>(row_cache + static_cast<size_t>(i) * kVec, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = exp_(v[j] - max_val) * inv_sum;
      store_item<kVec>(out + static_cast<size_t>(i) * kVec, v);
    }
  }
}

// Path (c), float4: a block per row, the rows of a block double-buffered in shared memory. While
// the block normalises one row, the next one (row + gridDim.x) is already streaming into the other
// buffer through cp.async (16-byte asynchronous copies global -> shared that bypass registers and
// L1), so the block has loads in flight all the time, not only at the start of each row. Thread t
// copies items t, t + kThreads, ... (float4) and is the only thread that reads them back, so the
// buffers need no barrier: cp.async's wait orders each thread's own copies. From shared memory the
// thread's items go to registers once (at most kPacks float4), and everything after that works on
// registers: the row's max, one exp per element against it, the row's sum (block_all_reduce).
template <int kThreads, int kPacks, int kStages>
__global__ void __launch_bounds__(kThreads)
    pipelined_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float reduce_max[kThreads / kWarpSize], reduce_sum[kThreads / kWarpSize];
  extern __shared__ __align__(16) float4 stage[];  // kStages buffers of cols / 4 float4
  const int tid = threadIdx.x;
  const int items = cols / 4;
  const int left = items - tid;  // pack p is in the row when p * kThreads < left

  // Issues this thread's copies of `row` into buffer `buf`, as one commit group.
  auto prefetch = [&](int64_t row, int buf) {
    const float4* src = reinterpret_cast<const float4*>(x + static_cast<size_t>(row) * cols) + tid;
    float4* dst = stage + static_cast<size_t>(buf) * items + tid;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      if (p * kThreads < left) __pipeline_memcpy_async(dst + p * kThreads, src + p * kThreads, 16);
    }
    __pipeline_commit();
  };

  // Prologue: the block's first kStages - 1 rows start streaming in. A missing row still commits
  // an (empty) group, so that group k always belongs to the block's k-th row.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    const int64_t row = blockIdx.x + int64_t(s) * gridDim.x;
    if (row < rows) {
      prefetch(row, s);
    } else {
      __pipeline_commit();
    }
  }
  int buf = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    // Start the row kStages - 1 ahead into the buffer the previous row used, then wait for this
    // row: "all but the newest kStages - 1 groups have landed".
    const int64_t ahead = row + int64_t(kStages - 1) * gridDim.x;
    const int ahead_buf = buf == 0 ? kStages - 1 : buf - 1;
    if (ahead < rows) {
      prefetch(ahead, ahead_buf);
    } else {
      __pipeline_commit();
    }
    __pipeline_wait_prior(kStages - 1);

    const float4* cached = stage + static_cast<size_t>(buf) * items + tid;
    float4* out = reinterpret_cast<float4*>(y + static_cast<size_t>(row) * cols) + tid;
    softmax_row_in_registers<kThreads, kPacks>(cached, out, left, reduce_max, reduce_sum);
    buf = buf + 1 == kStages ? 0 : buf + 1;
  }
}

// Path (c), float4, rows of 2K-16K columns: a block per row held in registers, no shared-memory
// staging: each thread loads its kPacks float4 straight from global memory (all of them before
// using any), then the row's max, one exp per element, the row's sum, the store. Two or more
// blocks share an SM, so one loads while another reduces.
template <int kThreads, int kPacks>
__global__ void __launch_bounds__(kThreads, 2)
    register_block_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float reduce_max[kThreads / kWarpSize], reduce_sum[kThreads / kWarpSize];
  const int tid = threadIdx.x;
  const int items = cols / 4;
  const int left = items - tid;  // pack p is in the row when p * kThreads < left
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float4* in = reinterpret_cast<const float4*>(x + static_cast<size_t>(row) * cols) + tid;
    float4* out = reinterpret_cast<float4*>(y + static_cast<size_t>(row) * cols) + tid;
    softmax_row_in_registers<kThreads, kPacks>(in, out, left, reduce_max, reduce_sum);
  }
}

// Path (d): a block per row too long for shared memory. Pass 1 folds each batch into an online
// (max, sum); pass 2 reads the row from global memory again (from L2 when it is still there).
// (Its float4 version needs ~80 registers, so one 512-thread block per SM; its 8 float4 loads
// per thread still put 64 KB in flight per SM. Forcing two blocks made ptxas spill.)
template <int kThreads, int kVec>
__global__ void __launch_bounds__(kThreads)
    two_pass_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float2 warp_pairs[2][kThreads / kWarpSize];
  const int tid = threadIdx.x;
  // 64-bit item indices: a row this long may hold close to 2^31 floats.
  const int64_t items = cols / kVec;

  int parity = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
    const float* in = x + static_cast<size_t>(row) * cols;
    float* out = y + static_cast<size_t>(row) * cols;

    // Pass 1: a batch's max, its sum against that max, then one merge into the running pair:
    // two rescaling exps per batch rather than per element. Padding is -inf and, like a -inf
    // element, is skipped in the sum (exp(-inf - -inf) would be NaN in an all -inf batch).
    float max_val = -INFINITY;
    float sum = 0.f;
    for (int64_t first = tid; first < items; first += kThreads * kBatch) {
      // As in block_kernel: compile-time offsets from item first, one bound per batch.
      const int64_t left = items - first;
      const float* src = in + first * kVec;
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (k * kThreads < left) {
          load_item<kVec>(src + k * kThreads * kVec, v[k]);
        } else {
#pragma unroll
          for (int j = 0; j < kVec; ++j) v[k][j] = -INFINITY;
        }
      }
      float batch_max = -INFINITY;
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) batch_max = fmaxf(batch_max, v[k][j]);
      }
      float batch_sum = 0.f;
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          batch_sum += v[k][j] == -INFINITY ? 0.f : exp_(v[k][j] - batch_max);
      }
      merge(max_val, sum, batch_max, batch_sum);
    }

    block_reduce<kThreads>(max_val, sum, warp_pairs[parity]);

    // Pass 2: read again, normalise, store; batched like pass 1 to keep loads in flight.
    const float inv_sum = 1.f / sum;
    for (int64_t first = tid; first < items; first += kThreads * kBatch) {
      const int64_t left = items - first;
      const float* src = in + first * kVec;
      float* dst = out + first * kVec;
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (k * kThreads < left) load_item<kVec>(src + k * kThreads * kVec, v[k]);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (k * kThreads < left) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) v[k][j] = exp_(v[k][j] - max_val) * inv_sum;
          store_item<kVec>(dst + k * kThreads * kVec, v[k]);
        }
      }
    }
  }
}

// ---- Host side -------------------------------------------------------------------------------

using KernelFn = void (*)(const float*, float*, int, int);

// What the launcher needs to know about the current device, looked up once per device.
struct DeviceInfo {
  int sms = 0;
  int cache_cols = 0;  // the longest row path (c) can hold in shared memory
  int pipe_cols = 0;   // the longest row whose two buffers fit (the pipelined float4 version)
};

// Lets a path (c) kernel use all the opt-in shared memory (the default cap is 48 KB) and
// lowers cache_cols to what is left of it beside the kernel's static arrays.
template <int kThreads, int kVec>
void opt_in_shared_memory(int optin_bytes, int& cache_cols) {
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, block_kernel<kThreads, kVec>));
  const int dynamic_bytes = optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
  CUDA_CHECK(cudaFuncSetAttribute(block_kernel<kThreads, kVec>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_bytes));
  cache_cols = std::min(cache_cols, dynamic_bytes / static_cast<int>(sizeof(float)));
}

// The same for the pipelined kernel, whose two buffers take 8 bytes per column.
template <int kThreads, int kPacks, int kStages>
void opt_in_pipelined_stages(int optin_bytes, int& pipe_cols) {
  cudaFuncAttributes attributes{};
  CUDA_CHECK(cudaFuncGetAttributes(&attributes, pipelined_kernel<kThreads, kPacks, kStages>));
  const int dynamic_bytes = optin_bytes - static_cast<int>(attributes.sharedSizeBytes);
  CUDA_CHECK(cudaFuncSetAttribute(pipelined_kernel<kThreads, kPacks, kStages>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_bytes));
  // kStages buffers of cols floats; cols a multiple of 4 (float4 rows).
  pipe_cols = std::min(pipe_cols, dynamic_bytes / static_cast<int>(kStages * sizeof(float)) / 4 * 4);
}

template <int kThreads, int kPacks>
void opt_in_pipelined(int optin_bytes, int& pipe_cols) {
  opt_in_pipelined_stages<kThreads, kPacks, kPipeStages>(optin_bytes, pipe_cols);
}

// Every (threads, packs) pair the dispatch can pick: 3..8 packs at 128 threads, 5..8 at larger
// blocks (a row that needs a larger block has more than 4 float4 per thread of it).
template <int kThreads, int... kPacks>
void opt_in_pipelined_all(int optin_bytes, int& pipe_cols) {
  (opt_in_pipelined<kThreads, kPacks>(optin_bytes, pipe_cols), ...);
}

const DeviceInfo& device_info() {
  static std::mutex mutex;
  static std::unordered_map<int, DeviceInfo> info_by_device;  // references stay valid
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = info_by_device.find(device);
  if (found != info_by_device.end()) return found->second;

  DeviceInfo info;
  CUDA_CHECK(cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, device));
  int optin_bytes = 0;
  CUDA_CHECK(
      cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  info.cache_cols = softmax::kNoColLimit;
  opt_in_shared_memory<128, 4>(optin_bytes, info.cache_cols);
  opt_in_shared_memory<256, 4>(optin_bytes, info.cache_cols);
  opt_in_shared_memory<512, 4>(optin_bytes, info.cache_cols);
  opt_in_shared_memory<128, 1>(optin_bytes, info.cache_cols);
  opt_in_shared_memory<256, 1>(optin_bytes, info.cache_cols);
  opt_in_shared_memory<512, 1>(optin_bytes, info.cache_cols);
  info.pipe_cols = softmax::kNoColLimit;
  opt_in_pipelined_all<128, 3, 4, 5, 6, 7, 8>(optin_bytes, info.pipe_cols);
  opt_in_pipelined_all<256, 5, 6, 7, 8>(optin_bytes, info.pipe_cols);
  opt_in_pipelined_all<512, 5, 6, 7, 8>(optin_bytes, info.pipe_cols);
  opt_in_pipelined_all<1024, 5, 6, 7, 8>(optin_bytes, info.pipe_cols);
  // One block of 1024 threads x kPipePacks float4 covers at most this many columns.
  info.pipe_cols = std::min(info.pipe_cols, 1024 * kPipePacks * 4);
  return info_by_device.emplace(device, info).first->second;
}

// Resident blocks per SM for a kernel at a block size and dynamic shared memory, from the
// occupancy calculator, cached per device (the answer depends on registers, shared memory and
// the device only).
int blocks_per_sm(KernelFn kernel, int threads, size_t smem_bytes) {
  static std::mutex mutex;
  static std::map<std::tuple<int, KernelFn, int, size_t>, int> cache;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const auto key = std::make_tuple(device, kernel, threads, smem_bytes);
  std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem_bytes));
  cache.emplace(key, blocks);
  return blocks;
}

// The persistent launch: as many blocks as the GPU holds at once, but never more than there
// are blocks' worth of rows (extra blocks would only find no row and exit).
// A kernel may ask for at least `min_rounds` rounds (rows per warp or block) even where the GPU
// could hold all the work at once.
void launch_persistent(KernelFn kernel, int threads, size_t smem_bytes, int64_t work_blocks,
                       const float* x, float* y, int rows, int cols, cudaStream_t stream,
                       int64_t min_rounds = 1) {
  const int per_sm = std::max(1, blocks_per_sm(kernel, threads, smem_bytes));
  const int64_t resident = int64_t(device_info().sms) * per_sm;
  // Balanced: every block gets the same number of rounds (ceil(work / resident)), with as few
  // blocks as that allows. 4096 rows on 132 resident blocks would give 4 blocks a 32nd row while
  // 128 idle; 128 blocks of 32 rows each finish together.
  const int64_t rounds = std::max((work_blocks + resident - 1) / resident, min_rounds);
  const auto blocks = static_cast<unsigned>((work_blocks + rounds - 1) / rounds);
  kernel<<<blocks, threads, smem_bytes, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

template <int kGroup, int kPacks, int kVec>
void launch_warp(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kWarpPathThreads / kGroup;
  const int64_t work_blocks = (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
  launch_persistent(warp_kernel<kGroup, kPacks, kVec>, kWarpPathThreads, 0, work_blocks, x, y,
                    rows, cols, stream);
}

template <int kPacks>
void launch_warp_prefetch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kWarpPathThreads / kWarpSize;
  const int64_t work_blocks = (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
  launch_persistent(warp_prefetch_kernel<kPacks>, kWarpPathThreads, 0, work_blocks, x, y, rows,
                    cols, stream, /*min_rounds=*/2);
}

template <int kThreads, int kVec>
void launch_block(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const size_t smem_bytes = static_cast<size_t>(cols) * sizeof(float);
  launch_persistent(block_kernel<kThreads, kVec>, kThreads, smem_bytes, rows, x, y, rows, cols,
                    stream);
}

template <int kThreads, int kPacks>
void launch_pipelined(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const size_t smem_bytes = kPipeStages * static_cast<size_t>(cols) * sizeof(float);
  launch_persistent(pipelined_kernel<kThreads, kPacks, kPipeStages>, kThreads, smem_bytes, rows, x,
                    y, rows, cols, stream);
}

// The packs per thread: just enough to cover the row (padding packs would cost exps), at least
// the smallest instantiated count.
template <int kThreads>
void launch_pipelined_packs(int items, const float* x, float* y, int rows, int cols,
                            cudaStream_t stream) {
  const int packs = (items + kThreads - 1) / kThreads;
  if constexpr (kThreads == 128) {  // only the smallest block meets rows this short
    if (packs <= 3) return launch_pipelined<kThreads, 3>(x, y, rows, cols, stream);
    if (packs <= 4) return launch_pipelined<kThreads, 4>(x, y, rows, cols, stream);
  }
  if (packs <= 5) return launch_pipelined<kThreads, 5>(x, y, rows, cols, stream);
  if (packs <= 6) return launch_pipelined<kThreads, 6>(x, y, rows, cols, stream);
  if (packs <= 7) return launch_pipelined<kThreads, 7>(x, y, rows, cols, stream);
  return launch_pipelined<kThreads, 8>(x, y, rows, cols, stream);
}

// Path (c): 128 threads for rows up to 8K columns, 256 up to 16K; 5..16 float4 per thread. One
// block per row, not a persistent grid: measured, the hardware's block scheduler, which hands an
// SM a new row the moment one of its blocks finishes, beat a persistent grid that deals rows out
// in a fixed order by 3-6% at 4K-16K columns (docs/notes/step07.md, change 7).
// STEP07_REGISTER_BLOCK_PERSISTENT=1 restores the persistent grid for comparison.
#ifndef STEP07_REGISTER_BLOCK_PERSISTENT
#define STEP07_REGISTER_BLOCK_PERSISTENT 0
#endif
template <int kThreads, int kPacks>
void launch_register_block(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if (STEP07_REGISTER_BLOCK_PERSISTENT) {
    return launch_persistent(register_block_kernel<kThreads, kPacks>, kThreads, 0, rows, x, y,
                             rows, cols, stream);
  }
  register_block_kernel<kThreads, kPacks><<<rows, kThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

template <int kThreads>
void launch_register_block_packs(int items, const float* x, float* y, int rows, int cols,
                                 cudaStream_t stream) {
  const int packs = (items + kThreads - 1) / kThreads;
  if constexpr (kThreads == 128) {  // rows of 2K-4K columns: 5..8 float4 per thread
    if (packs <= 5) return launch_register_block<kThreads, 5>(x, y, rows, cols, stream);
    if (packs <= 6) return launch_register_block<kThreads, 6>(x, y, rows, cols, stream);
    if (packs <= 7) return launch_register_block<kThreads, 7>(x, y, rows, cols, stream);
    if (packs <= 8) return launch_register_block<kThreads, 8>(x, y, rows, cols, stream);
  }
  switch (packs) {
    case 9: return launch_register_block<kThreads, 9>(x, y, rows, cols, stream);
    case 10: return launch_register_block<kThreads, 10>(x, y, rows, cols, stream);
    case 11: return launch_register_block<kThreads, 11>(x, y, rows, cols, stream);
    case 12: return launch_register_block<kThreads, 12>(x, y, rows, cols, stream);
    case 13: return launch_register_block<kThreads, 13>(x, y, rows, cols, stream);
    case 14: return launch_register_block<kThreads, 14>(x, y, rows, cols, stream);
    case 15: return launch_register_block<kThreads, 15>(x, y, rows, cols, stream);
    default: return launch_register_block<kThreads, 16>(x, y, rows, cols, stream);
  }
}

// Path (a): one item per lane, the group the smallest power of two that covers the row.
template <int kVec>
void launch_sub_warp(int items, const float* x, float* y, int rows, int cols,
                     cudaStream_t stream) {
  if (items <= 1) return launch_warp<1, 1, kVec>(x, y, rows, cols, stream);
  if (items <= 2) return launch_warp<2, 1, kVec>(x, y, rows, cols, stream);
  if (items <= 4) return launch_warp<4, 1, kVec>(x, y, rows, cols, stream);
  if (items <= 8) return launch_warp<8, 1, kVec>(x, y, rows, cols, stream);
  if (items <= 16) return launch_warp<16, 1, kVec>(x, y, rows, cols, stream);
  return launch_warp<32, 1, kVec>(x, y, rows, cols, stream);
}

// Path (b), float4: every pack count from 2 to 16, so a row wastes at most part of one float4
// per lane of padding (registers only; padding is never loaded). From 2 to 12 float4 per lane the
// kernel with the next row in flight, two rows per warp at least: measured 0.96-1.0 of memcpy at
// N = 256-1536 against 0.94-0.97 for one wave of warp_kernel, except at 4 float4 per lane
// (N = 385-512), where one wave measured 0.99-1.0 and two rounds 0.96 (docs/notes/step07.md,
// change 13). Above 12 the two rows would need more than 128 registers per lane.
constexpr int kMaxPrefetchPacks = 12;
constexpr int kOneWavePacks = 4;
void launch_warp_vec(int packs, const float* x, float* y, int rows, int cols,
                     cudaStream_t stream) {
  switch (packs) {
    case 2: return launch_warp_prefetch<2>(x, y, rows, cols, stream);
    case 3: return launch_warp_prefetch<3>(x, y, rows, cols, stream);
    case kOneWavePacks: return launch_warp<32, kOneWavePacks, 4>(x, y, rows, cols, stream);
    case 5: return launch_warp_prefetch<5>(x, y, rows, cols, stream);
    case 6: return launch_warp_prefetch<6>(x, y, rows, cols, stream);
    case 7: return launch_warp_prefetch<7>(x, y, rows, cols, stream);
    case 8: return launch_warp_prefetch<8>(x, y, rows, cols, stream);
    case 9: return launch_warp_prefetch<9>(x, y, rows, cols, stream);
    case 10: return launch_warp_prefetch<10>(x, y, rows, cols, stream);
    case 11: return launch_warp_prefetch<11>(x, y, rows, cols, stream);
    case kMaxPrefetchPacks: return launch_warp_prefetch<kMaxPrefetchPacks>(x, y, rows, cols, stream);
    case 13: return launch_warp<32, 13, 4>(x, y, rows, cols, stream);
    case 14: return launch_warp<32, 14, 4>(x, y, rows, cols, stream);
    case 15: return launch_warp<32, 15, 4>(x, y, rows, cols, stream);
    default: return launch_warp<32, kMaxVecPacks, 4>(x, y, rows, cols, stream);
  }
}

// Path (b), scalar: the fallback for unaligned data; powers of two keep the instantiations few.
void launch_warp_scalar(int packs, const float* x, float* y, int rows, int cols,
                        cudaStream_t stream) {
  if (packs <= 2) return launch_warp<32, 2, 1>(x, y, rows, cols, stream);
  if (packs <= 4) return launch_warp<32, 4, 1>(x, y, rows, cols, stream);
  if (packs <= 8) return launch_warp<32, 8, 1>(x, y, rows, cols, stream);
  if (packs <= 16) return launch_warp<32, 16, 1>(x, y, rows, cols, stream);
  return launch_warp<32, kMaxScalarPacks, 1>(x, y, rows, cols, stream);
}

// The dispatch by row length; the thresholds are in the file header.
template <int kVec>
void launch_by_length(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const int items = cols / kVec;
  constexpr int kMaxPacks = kVec == 4 ? kMaxVecPacks : kMaxScalarPacks;
  // (a) sub-warp groups, one item per lane.
  if (items <= kWarpSize) return launch_sub_warp<kVec>(items, x, y, rows, cols, stream);
  // (b) a warp per row, in registers.
  if (items <= kWarpSize * kMaxPacks) {
    const int packs = (items + kWarpSize - 1) / kWarpSize;
    if constexpr (kVec == 4) {
      return launch_warp_vec(packs, x, y, rows, cols, stream);
    } else {
      return launch_warp_scalar(packs, x, y, rows, cols, stream);
    }
  }
  // (c) float4 rows of 2K-16K columns: a block per row in registers. (c') longer float4 rows whose
  // two buffers fit: pipelined through shared memory, the smallest block whose kPipePacks float4
  // per thread cover the row. (c'') the rest that fits once in shared memory (scalar rows, float4
  // rows too long for two buffers): one buffer, the smallest block whose one batch covers it.
  if constexpr (kVec == 4) {
    // (c) rows of 2K-16K columns: a block per row, in registers.
    if (cols > kRegisterBlockFrom && cols <= 256 * 16 * 4) {
      if (items <= 128 * 16) return launch_register_block_packs<128>(items, x, y, rows, cols, stream);
      return launch_register_block_packs<256>(items, x, y, rows, cols, stream);
    }
    // (c') longer rows whose two buffers fit: pipelined through shared memory.
    if (cols <= device_info().pipe_cols) {
      if (items <= 128 * kPipePacks) return launch_pipelined_packs<128>(items, x, y, rows, cols, stream);
      if (items <= 256 * kPipePacks) return launch_pipelined_packs<256>(items, x, y, rows, cols, stream);
      if (items <= 512 * kPipePacks) return launch_pipelined_packs<512>(items, x, y, rows, cols, stream);
      return launch_pipelined_packs<1024>(items, x, y, rows, cols, stream);
    }
  }
  // (c'')
  if (cols <= device_info().cache_cols) {
    if (items <= 128 * kBatch) return launch_block<128, kVec>(x, y, rows, cols, stream);
    if (items <= 256 * kBatch) return launch_block<256, kVec>(x, y, rows, cols, stream);
    return launch_block<512, kVec>(x, y, rows, cols, stream);
  }
  // (d) two passes over global memory.
  launch_persistent(two_pass_kernel<kTwoPassThreads, kVec>, kTwoPassThreads, 0, rows, x, y,
                    rows, cols, stream);
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step07_persistent", x, y, rows, cols, softmax::kNoColLimit);
  // float4 only when every row start is 16-byte aligned: cols % 4 == 0 and x, y aligned.
  const bool aligned = cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (aligned) {
    launch_by_length<4>(x, y, rows, cols, stream);
  } else {
    launch_by_length<1>(x, y, rows, cols, stream);
  }
}

int max_cols() { return softmax::kNoColLimit; }

// Only path (d), rows longer than shared memory holds, reads the input twice.
softmax::Traffic traffic(int cols) {
  if (cols > device_info().cache_cols) return {2, 1, 0, 0};
  return {1, 1, 0, 0};
}

const softmax::Step& step() {
  static const softmax::Step s{"step07_persistent",
                               "persistent kernels, mapping by row length, rows in registers",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step07_persistent
