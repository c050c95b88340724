// SPDX-License-Identifier: MIT
// fastsoftmax: `typed_smem`, the 16-bit forward and every backward on rows longer than a block
// holds in registers (docs/library.md, "Other dtypes and the backward pass"). A row is kept in
// shared memory in its own dtype, so it is read once and written once: 2 bytes an element in
// bf16 or fp16 (a row twice as long as a float one fits), 4 or 8 in the backward (y and dy).
//
// A cluster of C CTAs (1-16) takes a row: CTA r holds packs [r * chunk, (r + 1) * chunk) of the
// row's body, and CTA 0 also the head and tail elements, in registers. Pass 1 loads the CTA's
// packs (kUnroll of each stream a thread in flight), copies them to shared memory unchanged and
// folds them into the thread's (max, sum) or dot product; the block reduces; with C > 1 each CTA
// publishes its result in its own shared memory, one cluster barrier, and every thread merges
// the C results through distributed shared memory in rank order (so every CTA gets the same bits).
// Pass 2 reads the packs back from shared memory and writes the output. Each thread reads back
// only the packs it stored, so the stage needs no barrier. Persistent: a cluster takes rows
// cluster, cluster + clusters, ...
#pragma once

#include <cooperative_groups.h>

#include "typed_rows.cuh"

namespace fastsoftmax::detail {

constexpr int kTypedSmemThreads = 512;
constexpr int kTypedMaxCluster = 16;  // 9-16: non-portable cluster sizes, allowed per kernel

template <typename T, int kVec, bool kBackward>
__global__ void __launch_bounds__(kTypedSmemThreads, 2)
    typed_smem_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                      int rows, int cols, int chunk) {
  namespace cg = cooperative_groups;
  using P = Pack<T, kVec>;
  constexpr int kThreads = kTypedSmemThreads;
  constexpr int kWarps = kThreads / kWarpSize;
  // Packs of each stream a thread has in flight: 4 of one stream, 2 of each of two.
  constexpr int kUnroll = kBackward ? 2 : 4;
  extern __shared__ uint4 stage_words[];
  P* stage_a = reinterpret_cast<P*>(stage_words);
  P* stage_b = stage_a + chunk;  // backward: dy after y
  __shared__ float2 pairs[2][kWarps];  // block reductions, by row parity
  __shared__ float slots[2][kWarps];
  __shared__ float2 published[2];  // this CTA's result for its peers, by row parity
  (void)published;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const cg::cluster_group cluster = cg::this_cluster();
  const int ctas = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
#else
  const int ctas = 1, rank = 0;  // no clusters before sm_90: the plan never asks for them
#endif
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

    // Pass 1.
    float m = -INFINITY, acc = 0.f;
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
          float v[kVec];
#pragma unroll
          for (int e = 0; e < kVec; ++e) v[e] = Elem<T>::in(pa[u].v[e]);
          online_add(m, acc, v);
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
    if constexpr (kBackward) {
      acc = fmaf(head_a, head_b, fmaf(tail_a, tail_b, acc));  // zeros where not owned
      acc = block_all_reduce<kThreads, false>(acc, slots[parity]);
    } else {
      float edges[2] = {has_head ? head_a : -INFINITY, has_tail ? tail_a : -INFINITY};
      online_add(m, acc, edges);
      block_reduce_pair<kThreads>(m, acc, pairs[parity]);
    }

    // The cluster's result: every CTA's, merged in rank order.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (ctas > 1) {
      if (t == 0) published[parity] = make_float2(m, acc);
      cluster.sync();
      float row_m = -INFINITY, row_acc = 0.f;
      for (int q = 0; q < ctas; ++q) {
        const float2 p = *cluster.map_shared_rank(&published[parity], q);
        if constexpr (kBackward) {
          row_acc += p.y;
        } else {
          merge(row_m, row_acc, p.x, p.y);
        }
      }
      m = row_m;
      acc = row_acc;
    }
#endif
    const float by = kBackward ? acc : reciprocal(acc);  // the dot product, or 1 / sum
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
  // A peer may still be reading this CTA's last published result.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (ctas > 1) cluster.sync();
#endif
}

}  // namespace fastsoftmax::detail
