// SPDX-License-Identifier: MIT
// fastsoftmax: `typed_smem`, the 16-bit forward and every backward on rows longer than a block
// holds in registers (docs/library.md, "Other dtypes and the backward pass"). A row is kept in
// shared memory in its own dtype, so it is read once and written once: 2 bytes an element in
// bf16 or fp16 (a row twice as long as a float one fits), 4 or 8 in the backward (y and dy).
//
// A cluster of C CTAs (1-16) takes a row: CTA r holds packs [r * chunk, (r + 1) * chunk) of the
// row's body, and CTA 0 also the head and tail elements, in registers. A CTA alone on its row
// loads its part through registers, a few packs a thread at a time, copying them to shared
// memory; a CTA of a cluster requests every pack of its part at once, from global to shared
// memory by cp.async (no registers hold them on the way), so the whole part is in flight. (On the
// H200 each was the faster where it is used; docs/notes/tuning.md.) Then the max (forward) or
// the dot product (backward), reduced over the block and, with C > 1, over the cluster (each CTA
// publishes its value, one cluster barrier, every thread combines all C in rank order through
// distributed shared memory, so every CTA gets the same bits); the forward then sums the exps
// against the max and reduces again (two exps an element in all, against one where the row stays
// in registers); the output is written. Thread t copies and reads back packs t, t + kThreads, ...
// only: the stage needs no barrier. Persistent: a cluster takes rows cluster, cluster + clusters,
// ...
#pragma once

#include <cooperative_groups.h>

#include "typed_rows.cuh"

namespace fastsoftmax::detail {

constexpr int kTypedMaxCluster = 16;  // 9-16: non-portable cluster sizes, allowed per kernel

// CTAs of 256 threads, four an SM (parts of up to a quarter of its shared memory), or of 512, two
// an SM (larger parts).
template <int kThreads>
constexpr int typed_smem_min_blocks() {
  return kThreads == 256 ? 4 : 2;
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80 and
// later): a thread may have as many in flight as its part of the row has packs. Completion is
// tracked per thread, in groups: the copies issued before one commit form a group, and
// wait_group N returns once at most N of the thread's groups are still in flight.
__device__ __forceinline__ void copy_async(void* to, const void* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(to))),
               "l"(from)
               : "memory");
}
__device__ __forceinline__ void copy_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// The largest of a pack of 8 16-bit values, taken in pairs in the dtype (three max instructions
// on pairs instead of eight conversions and eight float max). A NaN is skipped, as fmaxf skips
// it; it still reaches the sum through exp.
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

// Where one CTA's part of a row lies, and its head and tail elements (CTA 0 holds those, at most
// kVec - 1 < kThreads of each: thread t the t-th; load_edges loads them into registers).
template <typename T, int kVec>
struct TypedPart {
  int64_t offset = 0, tail_at = 0;
  // Elements before the row's first pack; this CTA's first pack of the body, and its count.
  int head = 0, begin = 0, count = 0;
  bool has_head = false, has_tail = false;
  float head_a = 0.f, head_b = 0.f, tail_a = 0.f, tail_b = 0.f;
};

template <typename T, int kVec, bool kBackward>
__device__ __forceinline__ TypedPart<T, kVec> typed_part(const T* a, const T* b, int64_t row,
                                                         int cols, int rank, int chunk) {
  TypedPart<T, kVec> q;
  q.offset = row * cols;
  const TypedSplit<T, kVec> s(a + q.offset, cols, true);
  q.head = s.head;
  q.begin = min(s.body, rank * chunk);
  q.count = min(s.body, q.begin + chunk) - q.begin;
  q.tail_at = q.offset + s.head + int64_t(s.body) * kVec;
  const int t = threadIdx.x;
  q.has_head = rank == 0 && t < s.head;
  q.has_tail = rank == 0 && t < s.tail;
  return q;
}

template <typename T, int kVec, bool kBackward>
__device__ __forceinline__ void load_edges(const T* a, const T* b, TypedPart<T, kVec>& q) {
  const int t = threadIdx.x;
  if (q.has_head) {
    q.head_a = Elem<T>::in(a[q.offset + t]);
    if constexpr (kBackward) q.head_b = Elem<T>::in(b[q.offset + t]);
  }
  if (q.has_tail) {
    q.tail_a = Elem<T>::in(a[q.tail_at + t]);
    if constexpr (kBackward) q.tail_b = Elem<T>::in(b[q.tail_at + t]);
  }
}

// kAsync: the part is requested at once by cp.async, then read from shared memory for the max or
// dot product. Otherwise kUnroll packs of each stream a thread go through registers at a time,
// copied to shared memory and folded into the max or dot product on the way (8 of one stream,
// 2 of each of two: more spilled).
template <typename T, int kVec, int kThreads, bool kBackward, bool kAsync>
__global__ void __launch_bounds__(kThreads, typed_smem_min_blocks<kThreads>())
    typed_smem_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                      int rows, int cols, int chunk) {
  namespace cg = cooperative_groups;
  using P = Pack<T, kVec>;
  constexpr int kWarps = kThreads / kWarpSize;
  extern __shared__ uint4 stage_words[];
  P* const buf = reinterpret_cast<P*>(stage_words);  // [streams][chunk]
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
  // The block's max or sum, then with C > 1 the cluster's: each CTA publishes its own, one
  // cluster barrier, and every thread combines all C in rank order (every CTA gets the same bits).
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
  // Thread t copies (and later reads) packs t, t + kThreads, ... of the part: its own, so no
  // barrier guards the stage.
  const int t = threadIdx.x;
  auto fetch = [&](const TypedPart<T, kVec>& q, P* buf) {
    const P* a_body = reinterpret_cast<const P*>(a + q.offset + q.head) + q.begin;
    const P* b_body = reinterpret_cast<const P*>(b + q.offset + q.head) + q.begin;
    for (int j = t; j < q.count; j += kThreads) {
      copy_async(&buf[j], &a_body[j]);
      if constexpr (kBackward) copy_async(&buf[chunk + j], &b_body[j]);
    }
    copy_commit();
  };

  const int64_t step = gridDim.x / ctas;
  int parity = 0;
  for (int64_t row = blockIdx.x / ctas; row < rows; row += step, parity ^= 1) {
    TypedPart<T, kVec> q = typed_part<T, kVec, kBackward>(a, b, row, cols, rank, chunk);
    // Pass 1: load and keep the part, and take its max (forward) or dot product (backward).
    float acc = kBackward ? 0.f : -INFINITY;
    auto take = [&](const P& pa, const P& pb) {
      if constexpr (kBackward) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc = fmaf(Elem<T>::in(pa.v[e]), Elem<T>::in(pb.v[e]), acc);
      } else {
        acc = fmaxf(acc, pack_max(pa));
      }
    };
    if constexpr (kAsync) {
      fetch(q, buf);
      load_edges<T, kVec, kBackward>(a, b, q);  // in flight with the copies
      copy_wait<0>();
      // Whole packs into registers first: read through references, the 16-bit elements were
      // loaded one at a time (LDS.U16 in the SASS).
#pragma unroll(kBackward ? 2 : 4)
      for (int j = t; j < q.count; j += kThreads) {
        const P pa = buf[j];
        const P pb = buf[kBackward ? chunk + j : j];
        take(pa, pb);
      }
    } else {
      constexpr int kUnroll = kBackward ? 2 : 8;
      const P* a_body = reinterpret_cast<const P*>(a + q.offset + q.head) + q.begin;
      const P* b_body = reinterpret_cast<const P*>(b + q.offset + q.head) + q.begin;
      for (int j0 = t; j0 < q.count; j0 += kThreads * kUnroll) {
        P pa[kUnroll], pb[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int j = j0 + u * kThreads;
          if (j < q.count) {
            pa[u] = a_body[j];
            if constexpr (kBackward) pb[u] = b_body[j];
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int j = j0 + u * kThreads;
          if (j >= q.count) break;
          buf[j] = pa[u];
          if constexpr (kBackward) buf[chunk + j] = pb[u];
          take(pa[u], kBackward ? pb[u] : pa[u]);
        }
      }
      load_edges<T, kVec, kBackward>(a, b, q);  // after the loop: live across it, they spilled
    }
    float by, m = 0.f;  // by: 1 / sum (forward) or the dot product (backward)
    if constexpr (kBackward) {
      acc = fmaf(q.head_a, q.head_b, fmaf(q.tail_a, q.tail_b, acc));  // zeros where not owned
      by = row_reduce(acc, 0, parity, false);
    } else {
      if (q.has_head) acc = fmaxf(acc, q.head_a);
      if (q.has_tail) acc = fmaxf(acc, q.tail_a);
      m = row_reduce(acc, 0, parity, true);
      // Pass 1b: the sum of exps against the row's max.
      float sum = 0.f;
#pragma unroll(kBackward ? 2 : 4)
      for (int j = t; j < q.count; j += kThreads) {
        const P pa = buf[j];
#pragma unroll
        for (int e = 0; e < kVec; ++e) sum += exp_(Elem<T>::in(pa.v[e]) - m);
      }
      if (q.has_head) sum += exp_(q.head_a - m);
      if (q.has_tail) sum += exp_(q.tail_a - m);
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
    P* o_body = reinterpret_cast<P*>(out + q.offset + q.head) + q.begin;
#pragma unroll(kBackward ? 2 : 4)
    for (int j = t; j < q.count; j += kThreads) {
      const P pa = buf[j];
      P pb;
      if constexpr (kBackward) pb = buf[chunk + j];
      P po;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        po.v[e] =
            Elem<T>::out(result(Elem<T>::in(pa.v[e]), kBackward ? Elem<T>::in(pb.v[e]) : 0.f));
      }
      o_body[j] = po;
    }
    if (q.has_head) out[q.offset + t] = Elem<T>::out(result(q.head_a, q.head_b));
    if (q.has_tail) out[q.tail_at + t] = Elem<T>::out(result(q.tail_a, q.tail_b));
  }
  // A peer may still be reading this CTA's last published values.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (ctas > 1) cluster.sync();
#endif
}

}  // namespace fastsoftmax::detail
