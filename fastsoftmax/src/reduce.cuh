// SPDX-License-Identifier: MIT
// fastsoftmax: the exponential, the merge and the reductions every path shares (docs/library.md,
// "The exponential and the merge").
#pragma once

#include <cmath>

namespace fastsoftmax::detail {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// The exponential of every path: exp(x) = 2^(x*log2(e)), with 2^y from the special-function
// unit's approximation (ex2.approx.ftz: two instructions instead of the dozen or so of an
// accurate expf). This is what __expf does, minus the three instructions __expf adds to return
// subnormal results: here a result under 2^-126 (x < -87.3) comes out 0, which no tolerance can
// see. The CUDA programming guide bounds __expf's error by 2 + 1.17*|x| ulp: under 1e-6 relative
// where exp(x - max) >= 1e-3 and under 3e-6 where it is >= 1e-8; smaller results are inside the
// tests' absolute tolerance of 1e-8.
// -inf gives 0 and NaN stays NaN. With the packs sized to the row, this exponential was the
// largest single gain of the tuning (4096x2176 from 0.73 to 0.90 of memcpy, H100).
__device__ __forceinline__ float exp_(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

// 1 / s from the special-function unit (rcp.approx.ftz: within 1 ulp), one instruction where
// 1.f / s costs a reciprocal, two FMAs and a branch to a slow path. A row's sum is 0
// (only -inf), at least 1, +inf or NaN, never subnormal: 1/0 = +inf, 1/inf = 0, NaN stays NaN,
// as with the division.
__device__ __forceinline__ float reciprocal(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return r;
}

// 2^(x * log2(e) - shift): exp(x - c) with shift = c * log2(e), one FMA and the special-function
// unit's 2^y (exp_ takes a subtraction and a multiplication before it). -inf gives 0; inf - inf
// and NaN give NaN, as in exp_. Only the 16-bit forward's word kernel uses it.
// Rounding c * log2(e) to float32 moves the exponent by up to half an ulp of it. The forward rounds
// two such shifts (the sum's, the output's), so a result moves by up to about |c| * 2^-23
// relative: at most about 2^-13 (a sixth of an fp16 ulp) where |c| < 1024, which is what
// shift_fits asks. Past that (large logits; bf16 reaches 3.4e38, where the shift would
// not even be finite) the caller takes exp_(x - c), whose error depends on x - c, not on c.
__device__ __forceinline__ bool shift_fits(float c) {
  return fabsf(c) < 1024.f || fabsf(c) == INFINITY;
}
__device__ __forceinline__ float exp_shifted(float x, float shift) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(fmaf(x, 1.4426950408889634f, -shift)));
  return y;
}
// log2(s) from the special-function unit (lg2.approx: absolute error about 2^-22). 0 gives -inf,
// +inf gives +inf, NaN stays NaN.
__device__ __forceinline__ float log2_(float s) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return r;
}

// exp(part_max - max_val), the factor that moves a partial sum onto a larger max. Equal maxima
// give 1 even when both are infinite: partials that saw only -inf (sum 0) or only NaN (sum NaN)
// merge to 0 or NaN, never to exp(-inf - -inf) = NaN. A +inf max needs no care: the partial that
// saw it already has sum NaN (exp(inf - inf)), and the merge keeps it.
__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : exp_(part_max - max_val);
}

// The factor that moves exps taken against `from` (against 0 where `from` is -inf) onto `to` >=
// from: 1 where they are equal (infinite ones too), 0 where `from` is -inf and `to` is not.
__device__ __forceinline__ float rebase(float from, float to) {
  return from == to ? 1.f : (from == -INFINITY ? 0.f : exp_(from - to));
}

// Merges the partial (other_max, other_sum) into (max_val, sum). __fadd_rn keeps the compiler from
// fusing one product into an FMA, so merge(a, b) and merge(b, a) round alike and both lanes of a
// butterfly step end with bit-identical results.
__device__ __forceinline__ void merge(float& max_val, float& sum, float other_max,
                                      float other_sum) {
  const float new_max = fmaxf(max_val, other_max);
  sum = __fadd_rn(sum * rescale(max_val, new_max), other_sum * rescale(other_max, new_max));
  max_val = new_max;
}

// Butterfly over groups of kGroup lanes (a power of two <= 32): after log2(kGroup) steps every
// lane of a group holds the group's max (kMax) or sum. a + b and b + a round alike, so all lanes
// agree. All 32 lanes must call it together.
template <int kGroup, bool kMax>
__device__ __forceinline__ float group_all_reduce(float v) {
#pragma unroll
  for (int offset = kGroup / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  return v;
}

// The warp's max in one instruction: redux.sync (sm_80 and later) reduces 32-bit integers only,
// so each float goes through a map that keeps its order: non-negative floats compare as their
// bits do; a negative one's bits, read as an int, order backwards, so they are flipped (all but
// the sign). -inf maps below every finite value, +inf above it, and a NaN with the sign bit clear
// above +inf (a max of NaN: the row's sum is NaN anyway, from its exp). Where fmaxf returns either
// of -0 and +0, this returns +0; exp sees no difference.
__device__ __forceinline__ int order_key(float f) {
  const int bits = __float_as_int(f);
  return bits >= 0 ? bits : bits ^ 0x7fffffff;
}
__device__ __forceinline__ float warp_max(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  int key;
  asm("redux.sync.max.s32 %0, %1, 0xffffffff;" : "=r"(key) : "r"(order_key(v)));
  return __int_as_float(key >= 0 ? key : key ^ 0x7fffffff);
#else
  return group_all_reduce<kWarpSize, true>(v);
#endif
}

// The same butterfly for (max, sum) pairs, over the whole warp: for partials taken against
// different maxima (the shared-memory and two-pass kernels).
__device__ __forceinline__ void warp_reduce_pair(float& max_val, float& sum) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_max = __shfl_xor_sync(kFullMask, max_val, offset);
    const float other_sum = __shfl_xor_sync(kFullMask, sum, offset);
    merge(max_val, sum, other_max, other_sum);
  }
}

// The warp's (max, sum) pair from each lane's pair (its sum taken against its own max): the max in
// one instruction (warp_max), each lane's sum moved onto it (one exponential), then a butterfly
// of adds. Every lane ends with the same bits (a + b and b + a round alike; the product is
// rounded before it is shuffled, __fmul_rn, so that no lane may fuse it into its first add).
// warp_reduce_pair merges five times, two exponentials each.
__device__ __forceinline__ void warp_pair_by_max(float& max_val, float& sum) {
  const float top = warp_max(max_val);
  sum = group_all_reduce<kWarpSize, false>(__fmul_rn(sum, rescale(max_val, top)));
  max_val = top;
}

// y = exp(x - base) * exp(base - row_max) / row_sum, with base the thread's own max: the factor a
// thread scales its exps by. A thread that saw no finite value holds only zeros: its factor is
// 0 / row_sum, which is 0, or NaN where the row's sum is NaN (a NaN or +inf anywhere in the row) as
// every other path gives it. A row of only -inf has sum 0: 0 / 0, NaN, again as elsewhere.
__device__ __forceinline__ float part_factor(float thread_max, float row_max, float row_sum) {
  return (thread_max == -INFINITY ? 0.f : rescale(thread_max, row_max)) * reciprocal(row_sum);
}

// The block's (max, sum) from one pair per warp, each taken against the warp's own max: lane 0 of
// every warp writes its pair to shared memory, one barrier, and every thread reads all kWarps pairs
// and merges them in the same order, so all threads agree bit for bit. `pairs` holds kWarps
// float2; a block that loops over rows alternates two such arrays by row parity (as
// block_reduce_pair).
template <int kThreads>
__device__ __forceinline__ void block_merge_warp_pairs(float warp_top, float warp_sum,
                                                       float2* pairs, float& row_max,
                                                       float& row_sum) {
  constexpr int kWarps = kThreads / kWarpSize;
  if (threadIdx.x % kWarpSize == 0)
    pairs[threadIdx.x / kWarpSize] = make_float2(warp_top, warp_sum);
  __syncthreads();
  float2 p[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) p[w] = pairs[w];
  row_max = p[0].x;
#pragma unroll
  for (int w = 1; w < kWarps; ++w) row_max = fmaxf(row_max, p[w].x);
  row_sum = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) row_sum += p[w].y * rescale(p[w].x, row_max);
}

// Block-wide max or sum that leaves the result in every thread: a butterfly in each warp, one
// value per warp through shared memory, one barrier, and a butterfly over the kWarps values (each
// group of kWarps lanes reads all of them). `slots` holds kWarps floats. A block that reduces
// twice per row (max, then sum) uses two slot arrays: every warp passes the sum's barrier after
// reading the max slots and vice versa, so neither is rewritten while still being read.
template <int kThreads, bool kMax>
__device__ __forceinline__ float block_all_reduce(float v, float* slots) {
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  v = group_all_reduce<kWarpSize, kMax>(v);
  if (lane == 0) slots[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  return group_all_reduce<kWarps, kMax>(slots[lane % kWarps]);
}

// The block-wide (max, sum) pair: warp butterflies, one pair per warp through shared memory, one
// barrier, a second butterfly. A persistent block reduces once per row, so `pairs` (two arrays
// of kWarps) alternates by row parity: a warp racing ahead to the next row writes the other
// array, never the one a slower warp may still be reading (it cannot get two rows ahead: that
// needs the next row's barrier, which waits for the slow warp). kByMax: warp_pair_by_max at both
// levels instead of warp_reduce_pair.
template <int kThreads, bool kByMax = false>
__device__ __forceinline__ void block_reduce_pair(float& max_val, float& sum, float2* pairs) {
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  auto over_warp = [](float& m, float& s) {
    if constexpr (kByMax) {
      warp_pair_by_max(m, s);
    } else {
      warp_reduce_pair(m, s);
    }
  };
  over_warp(max_val, sum);
  if (lane == 0) pairs[threadIdx.x / kWarpSize] = make_float2(max_val, sum);
  __syncthreads();
  const float2 pair = lane < kWarps ? pairs[lane] : make_float2(-INFINITY, 0.f);
  max_val = pair.x;
  sum = pair.y;
  over_warp(max_val, sum);
}

// Max and exp over values a thread holds in registers (K of them, or kPacks slots of kVec).
// fmaxf skips NaN, but a NaN still reaches the sum through exp and makes the row NaN.
template <int K>
__device__ __forceinline__ float max_of(const float (&v)[K]) {
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < K; ++i) m = fmaxf(m, v[i]);
  return m;
}
template <int kPacks, int kVec>
__device__ __forceinline__ float max_of(const float (&v)[kPacks][kVec]) {
  float m = -INFINITY;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) m = fmaxf(m, max_of(v[p]));
  return m;
}

// Once the max is known: one exp per element, kept in place for the store; returns their sum.
// With max -inf (a row of only -inf) this is exp(NaN): the row comes out NaN, as in torch; a +inf
// gives exp(inf - inf) = NaN likewise. Padding (-inf) gives 0.
template <int K>
__device__ __forceinline__ float exp_in_place(float (&v)[K], float max_val) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    v[i] = exp_(v[i] - max_val);
    sum += v[i];
  }
  return sum;
}
template <int kPacks, int kVec>
__device__ __forceinline__ float exp_in_place(float (&v)[kPacks][kVec], float max_val) {
  float sum = 0.f;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) sum += exp_in_place(v[p], max_val);
  return sum;
}

// Online: adds K values to a pair (max_val, sum), where sum is taken against max_val, or against 0
// while max_val is -inf (only -inf so far, or nothing). The values are left as their exps
// against the new max (0 where -inf): one exp each, and one more to move the sum onto a larger
// max. NaN and +inf reach the sum as NaN, as in exp_in_place.
template <int K>
__device__ __forceinline__ void online_add(float& max_val, float& sum, float (&v)[K]) {
  const float new_max = fmaxf(max_val, max_of(v));
  sum = sum * rebase(max_val, new_max) + exp_in_place(v, new_max == -INFINITY ? 0.f : new_max);
  max_val = new_max;
}

template <int K>
__device__ __forceinline__ void scale(float (&v)[K], float factor) {
#pragma unroll
  for (int i = 0; i < K; ++i) v[i] *= factor;
}

}  // namespace fastsoftmax::detail
