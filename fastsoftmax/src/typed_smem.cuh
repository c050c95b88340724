// SPDX-License-Identifier: MIT
// fastsoftmax: `typed_smem`, the 16-bit forward and every backward on rows longer than a block
// holds in registers (docs/library.md, "Other dtypes and the backward pass"). A row is kept in
// shared memory in its own dtype, so it is read once and written once: 2 bytes an element in
// bf16 or fp16 (a row twice as long as a float one fits), 4 or 8 in the backward (y and dy).
//
// A cluster of C CTAs (1-16) takes a row: CTA r holds packs [r * chunk, (r + 1) * chunk) of the
// row's body, and CTA 0 also the head and tail elements, in registers. Pass 1 loads the CTA's
// packs (kUnroll of each stream a thread in flight), copies them to shared memory unchanged and
// takes their max (forward) or the dot product (backward): a short loop, so the loads go out
// back to back. The block reduces; with C > 1 each CTA publishes its result in its own shared
// memory, one cluster barrier, and every thread combines the C results through distributed
// shared memory in rank order (so every CTA gets the same bits). The forward then sums the exps
// against the max from shared memory and reduces again (two exps an element in all, against
// one where the row stays in registers). Pass 2 reads the packs back from shared memory and
// writes the output. Each thread reads back only the packs it stored, so the stage needs no
// barrier. Persistent: a cluster takes rows cluster, cluster + clusters, ...
#pragma once

#include <cooperative_groups.h>

#include "typed_rows.cuh"

namespace fastsoftmax::detail {

constexpr int kTypedMaxCluster = 16;  // 9-16: non-portable cluster sizes, allowed per kernel

// CTAs of 256 threads, four an SM (parts of up to a quarter of its shared memory), or of 512, two
// an SM (larger parts): 64 registers a thread either way.
template <int kThreads>
constexpr int typed_smem_min_blocks() {
  return kThreads == 256 ? 4 : 2;
}

// The largest of a pack of 8 16-bit values, taken in pairs in the dtype (three max instructions
// on pairs instead of eight conversions and eight float max: the forward's first pass is this
// and the loads). A NaN is skipped, as fmaxf skips it; it still reaches the sum through exp.
__device__ __forceinline__ float pack_max(const Pack<__nv_bfloat16, 8>& p) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(p.v);
  const __nv_bfloat162 m = __hmax2(__hmax2(h[0], h[1]), __hmax2(h[2], h[3]));
  return fmaxf(__low2float(m), __high2float(m));
}
__device__ __forceinline__ float pack_max(const Pack<__half, 8>& p) {
  const auto* h = reinterpret_cast<const __half2*>(p.v);
  const __half2 m = __hmax2(__hmax2(h[0], h[1]), __hmax2(h[2], h[3]));
  return fmaxf(__low2float(m), __high2float(m));
}
template <int kVec>
__device__ __forceinline__ float pack_max(const Pack<float, kVec>& p) {
  float m = p.v[0];
#pragma unroll
  for (int e = 1; e < kVec; ++e) m = fmaxf(m, p.v[e]);
  return m;
}

template <typename T, int kVec, int kThreads, bool kBackward>
__global__ void __launch_bounds__(kThreads, typed_smem_min_blocks<kThreads>())
    typed_smem_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                      int rows, int cols, int chunk) {
  namespace cg = cooperative_groups;
  using P = Pack<T, kVec>;
  constexpr int kWarps = kThreads / kWarpSize;
  // Packs of each stream a thread has in flight: 8 of one stream (the forward's first pass only
  // takes a max), 2 of each of two (more spilled).
  constexpr int kUnroll = kBackward ? 2 : 8;
  extern __shared__ uint4 stage_words[];
  P* stage_a = reinterpret_cast<P*>(stage_words);
  P* stage_b = stage_a + chunk;  // backward: dy after y
  __shared__ float slots[2][2][kWarps];  // block reductions: [max or dot, sum][row parity]
  __shared__ float published[2][2];      // this CTA's max and sum (or dot) for its peers
  (void)published;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const cg::cluster_group cluster = cg::this_cluster();
  const int ctas = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
#else
  const int ctas = 1, rank = 0;  // no clusters before sm_90: the plan never asks for them
#endif
  // The block's max (kMax) or sum, then with C > 1 the cluster's: each CTA publishes its own,
  // one cluster barrier, and every thread combines all C in rank order.
  auto row_reduce = [&](float v, int which, int parity, bool is_max) {
    v = is_max ? block_all_reduce<kThreads, true>(v, slots[which][parity])
               : block_all_reduce<kThreads, false>(v, slots[which][parity]);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (ctas > 1) {
      if (threadIdx.x == 0) published[which][parity] = v;
      cluster.sync();
      v = is_max ? -INFINITY : 0.f;
      for (int q = 0; q < ctas; ++q) {
        const float p = *cluster.map_shared_rank(&published[which][parity], q);
        v = is_max ? fmaxf(v, p) : v + p;
      }
    }
#endif
    return v;
  };

  const int t = threadIdx.x;
  int parity = 0;
  for (int64_t row = blockIdx.x / ctas; row < rows; row += gridDim.x / ctas, parity ^= 1) {
    const int64_t offset = row * cols;
    const TypedSplit<T, kVec> s(a + offset, cols, true);
    const int begin = min(s.body, rank * chunk), end = min(s.body, begin + chunk);
    const P* a_body = reinterpret_cast<const P*>(a + offset + s.head);
    const P* b_body = reinterpret_cast<const P*>(b + offset + s.head);
    P* o_body = reinterpret_cast<P*>(out + offset + s.head);
    const int64_t tail_at = offset + s.head + int64_t(s.body) * kVec;
    // CTA 0 owns the head and tail: at most kVec - 1 < kThreads elements of each.
    const bool has_head = rank == 0 && t < s.head, has_tail = rank == 0 && t < s.tail;
    float head_a = 0.f, head_b = 0.f, tail_a = 0.f, tail_b = 0.f;

    // Pass 1: load, keep, and take the max (forward) or the dot product (backward).
    float acc = kBackward ? 0.f : -INFINITY;
    for (int i0 = begin + t; i0 < end; i0 += kThreads * kUnroll) {
      P pa[kUnroll], pb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kThreads;
        if (i < end) {
          pa[u] = a_body[i];
          if constexpr (kBackward) pb[u] = b_body[i];
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kThreads;
        if (i >= end) break;
        stage_a[i - begin] = pa[u];
        if constexpr (kBackward) {
          stage_b[i - begin] = pb[u];
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc = fmaf(Elem<T>::in(pa[u].v[e]), Elem<T>::in(pb[u].v[e]), acc);
        } else {
          acc = fmaxf(acc, pack_max(pa[u]));
        }
      }
    }
    if (has_head) {
      head_a = Elem<T>::in(a[offset + t]);
      if constexpr (kBackward) head_b = Elem<T>::in(b[offset + t]);
    }
    if (has_tail) {
      tail_a = Elem<T>::in(a[tail_at + t]);
      if constexpr (kBackward) tail_b = Elem<T>::in(b[tail_at + t]);
    }
    float by;  // forward: 1 / sum; backward: the dot product
    float m = 0.f;
    if constexpr (kBackward) {
      acc = fmaf(head_a, head_b, fmaf(tail_a, tail_b, acc));  // zeros where not owned
      by = row_reduce(acc, 0, parity, false);
    } else {
      if (has_head) acc = fmaxf(acc, head_a);
      if (has_tail) acc = fmaxf(acc, tail_a);
      m = row_reduce(acc, 0, parity, true);
      // Pass 1b: the sum of exps against the row's max, from shared memory.
      float sum = 0.f;
#pragma unroll 4
      for (int i = begin + t; i < end; i += kThreads) {
        const P pa = stage_a[i - begin];
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum += exp_(Elem<T>::in(pa.v[e]) - m);
      }
      if (has_head) sum += exp_(head_a - m);
      if (has_tail) sum += exp_(tail_a - m);
      by = reciprocal(row_reduce(sum, 1, parity, false));
    }
    auto result = [&](float va, float vb) {
      if constexpr (kBackward) {
        return va * (vb - by);
      } else {
        return exp_(va - m) * by;
      }
    };

    // Pass 2.
#pragma unroll 4
    for (int i = begin + t; i < end; i += kThreads) {
      const P pa = stage_a[i - begin];
      P pb;
      if constexpr (kBackward) pb = stage_b[i - begin];
      P po;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        po.v[e] = Elem<T>::out(
            result(Elem<T>::in(pa.v[e]), kBackward ? Elem<T>::in(pb.v[e]) : 0.f));
      }
      o_body[i] = po;
    }
    if (has_head) out[offset + t] = Elem<T>::out(result(head_a, head_b));
    if (has_tail) out[tail_at + t] = Elem<T>::out(result(tail_a, tail_b));
  }
  // A peer may still be reading this CTA's last published values.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (ctas > 1) cluster.sync();
#endif
}

}  // namespace fastsoftmax::detail
