// SPDX-License-Identifier: MIT
// fastsoftmax: the kernels for 16-bit rows (bf16, fp16) and for the backward pass in every dtype
// (docs/library.md, "Other dtypes and the backward pass"). Values travel in their dtype and are
// computed in float32.
//
// A row is split as the float paths split it (row_split.cuh), in units of 16 bytes: the head (the
// elements before the row's first 16-byte boundary), the body (whole 16-byte packs: 8 bf16 or
// fp16, 4 floats) and the tail. kVec is the elements a pack: 16 / sizeof(T), or 1 where the
// pointers do not share their offset from a 16-byte boundary (then every access is one element
// and there is no head or tail).
//
// The mappings, picked by the row's length (typed_launch.cuh):
//   - in registers (here): kThreads threads a row, a group of 1-32 lanes or a whole block, each
//     holding kPacks packs and its head and tail elements, as float32 (typed_rows_kernel) or, in
//     16-bit blocks and the backward's long rows, as words in the dtype (typed_words_kernel,
//     also across a cluster of 2-16 CTAs); the row is read once and written once;
//   - in shared memory (typed_smem.cuh): a CTA or a cluster of CTAs a row;
//   - two passes (here): a block a row, or several (typed_spread), for rows longer than 16 CTAs
//     hold or few rows that would leave SMs idle; the first pass reduces, the second reads the
//     row again to write it (three accesses an element instead of two).
// Forward: y = exp(x - max) / sum exp(x - max). Backward: dx = y * (dy - sum(dy * y)).
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "mbarrier.cuh"
#include "reduce.cuh"

namespace fastsoftmax::detail {

// Conversions between a dtype and the float32 all arithmetic is done in (round to nearest even).
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ __forceinline__ float in(float v) { return v; }
  static __device__ __forceinline__ float out(float v) { return v; }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float in(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

// kVec elements moved by one access: 16 bytes (one 128-bit load or store) for a full pack.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

// Where a row's head, body and tail lie. Every pointer of a launch shares its offset from a
// 16-byte boundary (the launcher checks), so x's row start tells the split for all of them.
template <typename T, int kVec>
struct TypedSplit {
  int head = 0, body = 0, tail = 0;  // elements, packs, elements
  __device__ __forceinline__ TypedSplit(const T* row, int cols, bool live) {
    if (!live) return;
    if constexpr (kVec == 1) {
      body = cols;
    } else {
      const int off = static_cast<int>((reinterpret_cast<uintptr_t>(row) / sizeof(T)) % kVec);
      head = off == 0 ? 0 : min(cols, kVec - off);
      body = (cols - head) / kVec;
      tail = cols - head - body * kVec;
    }
  }
};

// The part of a row one thread holds: kPacks packs (pack t, t + kThreads, ...) and head and tail
// elements t, t + kThreads, ... (kEdges of each).
template <int kVec, int kThreads, int kPacks>
struct HeldRow {
  static constexpr int kEdges = kVec == 1 ? 0 : (kVec - 1 + kThreads - 1) / kThreads;
  static constexpr int kEdgeSlots = kEdges > 0 ? kEdges : 1;
  float body[kPacks][kVec];
  float head[kEdgeSlots], tail[kEdgeSlots];
};

template <typename T, int kVec, int kThreads, int kPacks>
__device__ __forceinline__ void load_held(const T* row, const TypedSplit<T, kVec>& s, int t,
                                          float fill, HeldRow<kVec, kThreads, kPacks>& r) {
  using Row = HeldRow<kVec, kThreads, kPacks>;
  const auto* body = reinterpret_cast<const Pack<T, kVec>*>(row + s.head);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int i = t + k * kThreads;
    if (i < s.body) {
      const Pack<T, kVec> p = body[i];
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.body[k][e] = Elem<T>::in(p.v[e]);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.body[k][e] = fill;
    }
  }
  const T* tail = row + s.head + s.body * kVec;
#pragma unroll
  for (int e = 0; e < Row::kEdgeSlots; ++e) {
    const int i = t + e * kThreads;
    r.head[e] = Row::kEdges > 0 && i < s.head ? Elem<T>::in(row[i]) : fill;
    r.tail[e] = Row::kEdges > 0 && i < s.tail ? Elem<T>::in(tail[i]) : fill;
  }
}

template <typename T, int kVec, int kThreads, int kPacks>
__device__ __forceinline__ void store_held(T* row, const TypedSplit<T, kVec>& s, int t,
                                           const HeldRow<kVec, kThreads, kPacks>& r) {
  using Row = HeldRow<kVec, kThreads, kPacks>;
  auto* body = reinterpret_cast<Pack<T, kVec>*>(row + s.head);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int i = t + k * kThreads;
    if (i < s.body) {
      Pack<T, kVec> p;
#pragma unroll
      for (int e = 0; e < kVec; ++e) p.v[e] = Elem<T>::out(r.body[k][e]);
      body[i] = p;
    }
  }
  T* tail = row + s.head + s.body * kVec;
#pragma unroll
  for (int e = 0; e < Row::kEdgeSlots; ++e) {
    const int i = t + e * kThreads;
    if (Row::kEdges > 0 && i < s.head) row[i] = Elem<T>::out(r.head[e]);
    if (Row::kEdges > 0 && i < s.tail) tail[i] = Elem<T>::out(r.tail[e]);
  }
}

// Applies f to every value a thread holds (both edges included: padding is harmless to max,
// exp and products as the fills are chosen).
template <int kVec, int kThreads, int kPacks, typename F>
__device__ __forceinline__ void for_each_held(HeldRow<kVec, kThreads, kPacks>& r, F f) {
#pragma unroll
  for (int k = 0; k < kPacks; ++k)
#pragma unroll
    for (int e = 0; e < kVec; ++e) f(r.body[k][e]);
#pragma unroll
  for (int e = 0; e < HeldRow<kVec, kThreads, kPacks>::kEdgeSlots; ++e) {
    f(r.head[e]);
    f(r.tail[e]);
  }
}

// A value reduced over the kThreads threads of a row: shuffles inside a group of up to 32 lanes,
// or the whole block through `slots` (one float a warp; block_all_reduce says why a max and a sum
// need two arrays).
template <int kThreads, bool kMax>
__device__ __forceinline__ float row_all_reduce(float v, float* slots) {
  if constexpr (kThreads <= kWarpSize) {
    return group_all_reduce<kThreads, kMax>(v);
  } else {
    return block_all_reduce<kThreads, kMax>(v, slots);
  }
}

// Blocks of 128 threads for the groups (four independent warps pack the SMs evenly), one row a
// block of kThreads otherwise.
template <int kThreads>
__host__ __device__ constexpr int typed_block_threads() {
  return kThreads <= kWarpSize ? 128 : kThreads;
}

// In registers. kBackward = false: out = softmax(a) (b unused). kBackward = true: a = y, b = dy,
// out = dx. In place (out == a or out == b) is allowed although the pointers are __restrict__:
// each element is read, then written, by the same thread, and never read after it is written.
// One row a group, no persistent grid (the launcher says why); a group past the last row takes
// part with nothing loaded or stored, so every lane of a warp reaches every shuffle.
// Blocks an SM the register budget is set for: four of 128 threads, two of 256, else one.
template <int kThreads>
__host__ __device__ constexpr int typed_min_blocks() {
  return typed_block_threads<kThreads>() <= 128 ? 4 : kThreads == 256 ? 2 : 1;
}

// kBlock: the block's threads (groups: a block of one warp leaves the registers' limit on the rows
// an SM holds at whole warps rather than whole blocks of four; the register budget is the same).
template <typename T, int kVec, int kThreads, int kPacks, bool kBackward,
          int kBlock = typed_block_threads<kThreads>()>
__global__ void __launch_bounds__(kBlock, typed_min_blocks<kThreads>() *
                                              typed_block_threads<kThreads>() / kBlock)
    typed_rows_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                      int rows, int cols) {
  static_assert(kBlock % kThreads == 0 && (kThreads <= kWarpSize || kBlock == kThreads),
                "groups fill the block; a larger row takes the block");
  constexpr int kRowsPerBlock = kBlock / kThreads;
  constexpr int kSlots = kThreads > kWarpSize ? kThreads / kWarpSize : 1;
  __shared__ float slots[2][kSlots];
  const int t = threadIdx.x % kThreads;
  const int sub = threadIdx.x / kThreads;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + sub;
  const bool live = row < rows;
  const int64_t offset = (live ? row : 0) * cols;
  const TypedSplit<T, kVec> s(a + offset, cols, live);
  HeldRow<kVec, kThreads, kPacks> v;
  if constexpr (!kBackward) {
    load_held(a + offset, s, t, -INFINITY, v);
    float m = -INFINITY;
    for_each_held(v, [&](float x) { m = fmaxf(m, x); });
    m = row_all_reduce<kThreads, true>(m, slots[0]);
    float sum = 0.f;
    for_each_held(v, [&](float& x) {
      x = exp_(x - m);
      sum += x;
    });
    const float inv = reciprocal(row_all_reduce<kThreads, false>(sum, slots[1]));
    for_each_held(v, [&](float& x) { x *= inv; });
  } else {
    HeldRow<kVec, kThreads, kPacks> g;
    load_held(a + offset, s, t, 0.f, v);
    load_held(b + offset, s, t, 0.f, g);
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int e = 0; e < kVec; ++e) dot = fmaf(v.body[k][e], g.body[k][e], dot);
#pragma unroll
    for (int e = 0; e < HeldRow<kVec, kThreads, kPacks>::kEdgeSlots; ++e) {
      dot = fmaf(v.head[e], g.head[e], dot);
      dot = fmaf(v.tail[e], g.tail[e], dot);
    }
    dot = row_all_reduce<kThreads, false>(dot, slots[0]);
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int e = 0; e < kVec; ++e) v.body[k][e] *= g.body[k][e] - dot;
#pragma unroll
    for (int e = 0; e < HeldRow<kVec, kThreads, kPacks>::kEdgeSlots; ++e) {
      v.head[e] *= g.head[e] - dot;
      v.tail[e] *= g.tail[e] - dot;
    }
  }
  store_held(out + offset, s, t, v);
}

// 16-bit rows in blocks of 128-512 threads, held in registers in their dtype: a 16-byte pack as
// four 32-bit words of two values each, half the registers of the same values in float32, so a
// block holds twice the row, or an SM twice the blocks. Each pass converts the words it needs
// (a shift or mask in bf16, a conversion instruction in fp16); the forward takes each
// exponential twice (for the sum, then for the output), as exp(x - max) is never stored.
//
// ptxas sees that the conversions of the sum pass and of the output pass give the same values
// and would keep the float32 copies alive between them, giving back the registers this saves. So
// each pass first passes every word through a byte permutation whose selector depends on that
// pass's reduced value: the identity (in bf16, the conversion: PassWords), or all zero bytes where
// the value is NaN (then every output of the row is NaN anyway, whatever the words). The words of
// one pass are then not the words of another as far as ptxas can prove, and no pass can run
// before its reduction.
template <typename T>
__device__ __forceinline__ float word_lo(unsigned w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __uint_as_float(w << 16);  // bf16 is the top half of a float32
  } else {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
  }
}
template <typename T>
__device__ __forceinline__ float word_hi(unsigned w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __uint_as_float(w & 0xffff0000u);
  } else {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
}
// Two float32 results as one word, each rounded to the dtype (round to nearest even).
template <typename T>
__device__ __forceinline__ unsigned word_of(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&v);
  }
}
// Word j of a pack, and the same through a byte permutation (see word_lo).
__device__ __forceinline__ unsigned word_of_pack(const uint4& p, int j) {
  return j == 0 ? p.x : j == 1 ? p.y : j == 2 ? p.z : p.w;
}
__device__ __forceinline__ unsigned word_at(const uint4& p, int j, unsigned selector) {
  return __byte_perm(word_of_pack(p, j), 0u, selector);
}
// A pass's reading of a word's two values as float32, through selectors that depend on the pass's
// reduced value as above. In bf16 the permutation is the conversion too: a bf16 value is the top
// half of a float32, so one byte permutation a value moves its two bytes up and zeroes the low two
// (or zeroes all four where the reduced value is NaN). fp16 permutes the word, then converts.
template <typename T>
struct PassWords {
  unsigned lo, hi;  // bf16: a selector a half; fp16: the word's selector (in lo)
  __device__ __forceinline__ explicit PassWords(float reduced) {
    const bool nan = reduced != reduced;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      lo = nan ? 0x4444u : 0x1044u;
      hi = nan ? 0x4444u : 0x3244u;
    } else {
      lo = hi = nan ? 0x4444u : 0x3210u;
    }
  }
  __device__ __forceinline__ float low(unsigned w) const {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __uint_as_float(__byte_perm(w, 0u, lo));
    } else {
      return word_lo<T>(__byte_perm(w, 0u, lo));
    }
  }
  __device__ __forceinline__ float high(unsigned w) const {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __uint_as_float(__byte_perm(w, 0u, hi));
    } else {
      return word_hi<T>(__byte_perm(w, 0u, lo));
    }
  }
};
// The largest of kPacks packs' values, in pairs in the dtype (max instructions on pairs, one
// conversion at the end). A NaN is skipped, as fmaxf skips it; it still reaches the sum through
// exp.
template <typename T, int kPacks>
__device__ __forceinline__ float words_max(const uint4 (&p)[kPacks]) {
  using T2 = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>;
  T2 m = reinterpret_cast<const T2*>(&p[0])[0];
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const auto* h = reinterpret_cast<const T2*>(&p[k]);
    m = __hmax2(m, __hmax2(__hmax2(h[0], h[1]), __hmax2(h[2], h[3])));
  }
  return fmaxf(__low2float(m), __high2float(m));
}
// Float32 rows (the backward) use the same kernel: a word is one value, nothing to convert.
template <typename T>
__host__ __device__ constexpr int values_a_word() {
  return sizeof(T) == 2 ? 2 : 1;
}
template <typename T>
__device__ __forceinline__ float word_value(unsigned w, int h) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(w);
  } else {
    return h == 0 ? word_lo<T>(w) : word_hi<T>(w);
  }
}

// A word of two -inf (the forward's padding: no part in the max or the sum).
template <typename T>
__device__ __forceinline__ unsigned minus_infinity_word() {
  return std::is_same_v<T, __nv_bfloat16> ? 0xff80ff80u : 0xfc00fc00u;
}

// The most CTAs a word cluster takes (typed_launch.cuh checks kTypedMaxCluster against it).
constexpr int kWordsMaxCluster = 16;

// Blocks an SM the register budget of typed_words_kernel is set for: a thread's words plus about
// 24 registers for addresses, indices and sums, rounded as the hardware allocates (8 a thread).
template <int kThreads, int kWords>
__host__ __device__ constexpr int typed_words_min_blocks() {
  constexpr int regs = (kWords + 24 + 7) / 8 * 8;
  constexpr int by_regs = 65536 / (kThreads * regs);
  constexpr int by_threads = 2048 / kThreads;
  return by_regs < 1 ? 1 : by_regs < by_threads ? by_regs : by_threads;
}

// kBackward = false: out = softmax(a). kBackward = true: a = y, b = dy, out = dx. In place allowed
// (each element is read, then written, by the thread that holds it). A block a row, kPacks packs a
// thread (pack t, t + kThreads, ...) and its head and tail element (at most 7 of each: one a
// thread). kCluster (sm_90): a cluster of C CTAs a row, CTA r holding packs [r * chunk, (r + 1) *
// chunk) of the body (CTA 0 also the head and tail). Every warp pushes its (max, sum) pair
// (forward, row_pair) or its dot product (backward, row_dot) into every CTA of the cluster, and
// each CTA reduces all of them. Every CTA gets the same bits.
//   kStaged (backward clusters): dy is copied into dynamic shared memory (kPacks * kThreads packs,
// [pack][thread], which is the CTA's packs in order) instead of registers, so that the registers
// hold y only and two CTAs of 8 packs fit an SM where holding both streams takes one. The copy is
// 16 bytes a thread by cp.async, or with kBulk one bulk copy a row (thread 0, counted off
// `staged_in`), issued after the previous row's closing barrier.
template <typename T, int kThreads, int kPacks, bool kBackward, bool kCluster = false,
          bool kStaged = false, bool kBulk = false>
__global__ void __launch_bounds__(
    kThreads, typed_words_min_blocks<kThreads, 4 * kPacks*(kBackward && !kStaged ? 2 : 1)>())
    typed_words_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                       int rows, int cols, int chunk) {
  static_assert((sizeof(T) == 2 || kBackward) && kThreads >= 128,
                "16-bit packs, or the float32 backward, in blocks");
  static_assert(!kStaged || (kBackward && kCluster), "dy is staged in the backward's clusters");
  static_assert(!kBulk || kStaged, "the bulk copy is of staged dy");
  extern __shared__ uint4 staged[];         // kStaged: this CTA's packs of dy
  __shared__ unsigned long long staged_in;  // kBulk: one phase a row, the copy's bytes
  (void)staged, (void)staged_in;
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPerWord = values_a_word<T>();
  // Block reductions, by row parity: a warp racing ahead to the next row writes the other array,
  // and cannot get two rows ahead (that needs the next row's barrier), so no barrier ends a
  // forward row. Forward: (max, sum) pairs; backward: the dot product.
  __shared__ float2 pairs[2][kThreads / kWarpSize];
  __shared__ float slots[2][kThreads / kWarpSize];
  // The cluster exchange (kCluster): every warp's pair (forward) or dot product (backward, in .x)
  // pushed into every CTA of the cluster, [row parity][rank * warps + warp], with a transaction
  // barrier a parity.
  constexpr int kWarps = kThreads / kWarpSize;
  __shared__ float2 pushed[kCluster ? 2 : 1][kCluster ? kWordsMaxCluster * kWarps : 1];
  __shared__ unsigned long long pushed_in[2];
  (void)pairs, (void)slots, (void)pushed, (void)pushed_in;
  int ctas = 1, rank = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  [[maybe_unused]] const cg::cluster_group cluster = cg::this_cluster();
  if constexpr (kCluster) {
    ctas = static_cast<int>(cluster.num_blocks());
    rank = static_cast<int>(cluster.block_rank());
  }
#endif
  // The cluster exchange, pushed, as the float32 clusters' exchange is (split_exchange.cuh,
  // ClusterExchange): lanes q < C of each warp store the warp's pair into CTA q's `pushed` with
  // st.async, each store counting its bytes off that CTA's barrier, which expects C * kWarps
  // pairs; each CTA waits on its own barrier only, then every warp reduces the C * kWarps pairs
  // (the same values in the same places in every CTA, so all get the same bits). No block barrier
  // and no cluster barrier a row.
  //   Two sets by row parity: a warp stores row i+2's pair into the set that holds row i's only
  // after its CTA received every warp's row i+1 pair, and each warp sends that only after its
  // reads of row i's set have returned (their values are used before it). A pair that arrives
  // before its receiver has armed the barrier for its row drives the count below zero, which is
  // allowed: the phase cannot complete before the receiver's own arrival.
  // Pushes this warp's (x, y) into every CTA of the cluster and waits until this CTA holds all
  // C * kWarps of the row's pairs (in pushed[use & 1]).
  auto push_and_wait = [&](float x, float y, int64_t use) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int parity = static_cast<int>(use & 1);
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const uint32_t barrier = shared_at(&pushed_in[parity]);
    if (threadIdx.x == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier),
                   "r"(ctas * kWarps * int(sizeof(float2)))
                   : "memory");
    if (lane < ctas)
      asm volatile(
          "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::
              "r"(in_cta(shared_at(&pushed[parity][rank * kWarps + warp]), lane)),
          "f"(x), "f"(y), "r"(in_cta(barrier, lane))
          : "memory");
    wait_parity(barrier, static_cast<uint32_t>((use >> 1) & 1));
#else
    (void)x, (void)y, (void)use;
    __trap();  // clusters are launched only on sm_90 and later (the launcher checks)
#endif
  };
  // The row's (max, sum) pair (forward) from each thread's pair, taken against the thread's own
  // max (warp_pair_by_max: a max, one exponential a lane, a butterfly of adds): over the block (one
  // barrier a row), or over the cluster, pushed.
  auto row_pair = [&](float& m, float& sum, int64_t use) {
    const int parity = static_cast<int>(use & 1);
    if constexpr (!kCluster) {
      block_reduce_pair<kThreads, true>(m, sum, pairs[parity]);
    } else {
      warp_pair_by_max(m, sum);
      push_and_wait(m, sum, use);
      float pm = -INFINITY, ps = 0.f;
      for (int k = threadIdx.x % kWarpSize; k < ctas * kWarps; k += kWarpSize) {
        const float2 q = pushed[parity][k];
        merge(pm, ps, q.x, q.y);
      }
      m = pm;
      sum = ps;
      warp_pair_by_max(m, sum);
    }
  };
  // The row's dot product (backward): over the block (one barrier), or (kCluster) each warp's
  // pushed as above and every warp sums the C * kWarps values by a butterfly.
  auto row_dot = [&](float v, int64_t use) {
    const int parity = static_cast<int>(use & 1);
    if constexpr (!kCluster) {
      v = block_all_reduce<kThreads, false>(v, slots[parity]);
    } else {
      v = group_all_reduce<kWarpSize, false>(v);
      push_and_wait(v, 0.f, use);
      float d = 0.f;
      for (int k = threadIdx.x % kWarpSize; k < ctas * kWarps; k += kWarpSize)
        d += pushed[parity][k].x;
      v = group_all_reduce<kWarpSize, false>(d);
    }
    return v;
  };
  const int t = threadIdx.x;
  const unsigned fill = kBackward ? 0u : minus_infinity_word<T>();
  const float edge_fill = kBackward ? 0.f : -INFINITY;
  const int64_t step = gridDim.x / ctas;
  if constexpr (kCluster) {
    // The barriers set up and the set-up made visible before any CTA pushes a pair.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (kBulk) {
      if (threadIdx.x == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_at(&staged_in))
                     : "memory");
    }
#endif
    init_row_barriers(pushed_in);  // its fence covers staged_in's set-up too
    cluster_barrier_relaxed();
  }
  int64_t use = 0;  // this CTA's rows so far (its parity picks the reductions' set)
  for (int64_t row = blockIdx.x / ctas; row < rows; row += step, ++use) {
    const int64_t offset = row * cols;
    const TypedSplit<T, kVec> s(a + offset, cols, true);
    // This CTA's packs of the body: [begin, end) (all of them without a cluster).
    const int begin = kCluster ? min(s.body, rank * chunk) : 0;
    const int end = kCluster ? min(s.body, begin + chunk) : s.body;
    const auto* a_body = reinterpret_cast<const uint4*>(a + offset + s.head) + begin;
    const auto* b_body = reinterpret_cast<const uint4*>(b + offset + s.head) + begin;
    const int count = end - begin;
    const int64_t tail_at = offset + s.head + int64_t(s.body) * kVec;
    uint4 wa[kPacks], wb[kBackward && !kStaged ? kPacks : 1];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (kBulk) {
      // The previous row's reads of `staged` ended at its closing barrier (generic proxy); the
      // proxy fence orders them before the bulk copy (async proxy) overwrites them.
      if (t == 0) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        bulk_copy_counted(shared_at(staged), b_body,
                          static_cast<uint32_t>(count) * uint32_t(sizeof(uint4)),
                          shared_at(&staged_in));
      }
    }
#endif
    if constexpr (kStaged && !kBulk) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int i = t + k * kThreads;
        copy16_async(shared_at(&staged[k * kThreads + t]), b_body + i, i < count);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int i = t + k * kThreads;
      wa[k] = make_uint4(fill, fill, fill, fill);
      if constexpr (kBackward && !kStaged) wb[k] = wa[k];
      if (i < count) {
        wa[k] = a_body[i];
        if constexpr (kBackward && !kStaged) wb[k] = b_body[i];
      }
    }
    // Pack k of dy (kBackward): in registers, or the thread's own copy in shared memory (zero past
    // the CTA's packs, where y is zero too).
    auto pack_b = [&](int k) -> uint4 {
      if constexpr (kStaged) {
        return t + k * kThreads < count ? staged[k * kThreads + t] : make_uint4(0u, 0u, 0u, 0u);
      } else if constexpr (kBackward) {
        return wb[k];
      } else {
        return make_uint4(0u, 0u, 0u, 0u);  // the forward has no dy
      }
    };
    const bool has_head = rank == 0 && t < s.head, has_tail = rank == 0 && t < s.tail;
    const float ha = has_head ? Elem<T>::in(a[offset + t]) : edge_fill;
    const float ta = has_tail ? Elem<T>::in(a[tail_at + t]) : edge_fill;
    float hb = 0.f, tb = 0.f;
    if constexpr (kBackward) {
      hb = has_head ? Elem<T>::in(b[offset + t]) : 0.f;
      tb = has_tail ? Elem<T>::in(b[tail_at + t]) : 0.f;
    }
    auto* o_body = reinterpret_cast<uint4*>(out + offset + s.head) + begin;
    // out = f(a, b) for every value this thread holds, each read through the pass's selectors.
    auto write = [&](const PassWords<T>& by, auto f) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int i = t + k * kThreads;
        if (i < count) {
          unsigned o[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if constexpr (kPerWord == 1) {  // float32: no conversion for ptxas to share
              o[j] = __float_as_uint(f(word_value<T>(word_of_pack(wa[k], j), 0),
                                       word_value<T>(word_of_pack(pack_b(k), j), 0)));
            } else {
              const unsigned x = word_of_pack(wa[k], j);
              const unsigned y = kBackward ? word_of_pack(pack_b(k), j) : 0u;
              o[j] = word_of<T>(f(by.low(x), by.low(y)), f(by.high(x), by.high(y)));
            }
          }
          o_body[i] = make_uint4(o[0], o[1], o[2], o[3]);
        }
      }
      if (has_head) out[offset + t] = Elem<T>::out(f(ha, hb));
      if (has_tail) out[tail_at + t] = Elem<T>::out(f(ta, tb));
    };
    if constexpr (!kBackward) {
      // The thread's max (on pairs of 16-bit values), its sum against that max (0 where it saw
      // only -inf), then the row's pair: one reduction a row.
      float m = fmaxf(words_max<T>(wa), fmaxf(ha, ta));
      const float base = m == -INFINITY ? 0.f : m;
      const PassWords<T> by_base(base);
      auto sum_of = [&](auto e) {
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < kPacks; ++k)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const unsigned x = word_of_pack(wa[k], j);
            sum += e(by_base.low(x));
            sum += e(by_base.high(x));
          }
        return sum + e(ha) + e(ta);
      };
      // Both passes fold the subtraction into one FMA (exp_shifted) unless the values are too
      // large for that (shift_fits: |value| < 1024): a branch the same for a whole thread or row.
      const float base_shift = base * 1.4426950408889634f;
      float sum = shift_fits(base) ? sum_of([&](float x) { return exp_shifted(x, base_shift); })
                                   : sum_of([&](float x) { return exp_(x - base); });
      row_pair(m, sum, use);
      if (shift_fits(m)) {
        // exp(x - m) / sum = 2^(x * log2(e) - (m * log2(e) + log2(sum))): the division folds
        // into the exponent. A row of only -inf gives -inf - -inf = NaN, as exp(x - m) / sum.
        const float shift = fmaf(m, 1.4426950408889634f, log2_(sum));
        if constexpr (std::is_same_v<T, __nv_bfloat16>) {
          // ex2.approx.ftz returns 0 under 2^-126, where bf16 still has subnormals (down to
          // 2^-133): take 2^(y + 64), then scale by 2^-64 (exact; the product keeps subnormals).
          const float raised = shift - 64.f;
          write(PassWords<T>(shift),
                [&](float x, float) { return exp_shifted(x, raised) * 0x1p-64f; });
        } else {
          write(PassWords<T>(shift), [&](float x, float) { return exp_shifted(x, shift); });
        }
      } else {
        const float inv = reciprocal(sum);
        write(PassWords<T>(inv), [&](float x, float) { return exp_(x - m) * inv; });
      }
    } else {
      // cp.async: a thread reads back only the copies it issued, so its own wait makes them
      // visible to it. Bulk: every thread waits for the row's phase of `staged_in`.
      if constexpr (kBulk) {
        wait_parity(shared_at(&staged_in), static_cast<uint32_t>(use & 1));
      } else if constexpr (kStaged) {
        asm volatile("cp.async.wait_all;" ::: "memory");
      }
      float dot = 0.f;
#pragma unroll
      for (int k = 0; k < kPacks; ++k)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const unsigned y = word_at(wa[k], j, 0x3210u), g = word_at(pack_b(k), j, 0x3210u);
#pragma unroll
          for (int h = 0; h < kPerWord; ++h)
            dot = fmaf(word_value<T>(y, h), word_value<T>(g, h), dot);
        }
      dot = fmaf(ha, hb, dot);
      dot = fmaf(ta, tb, dot);
      dot = row_dot(dot, use);
      write(PassWords<T>(dot), [&](float y, float g) { return y * (g - dot); });
      // The backward keeps a barrier at the end of each row, as it had before the forward's
      // reductions alternated by parity: measured without it, the float32 backward's long rows
      // were slower in one run (1024x131072 0.91 to 0.88), and it gains nothing from racing ahead.
      __syncthreads();
    }
  }
  // No peer stores into this CTA's shared memory after it passed its last row's wait (every pair
  // it receives has landed by then). The relaxed barrier keeps each CTA until every peer has
  // passed its own last wait, so none exits while its stores into a peer are still in flight.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (kCluster) cluster_barrier_relaxed();
#endif
}

// Two passes, a few packs a thread in flight per step. Forward: an online (max, sum) per thread,
// merged over the block, then exp(x - max) / sum written. Backward: sum(y * dy), then
// y * (dy - sum) written.
//
// kWhole: a block of kThreads a row, both passes (`typed_two_pass`). Spread (`typed_spread`, few
// rows): `parts` blocks a row, each taking a slice of the body (part 0 also the head and tail), in
// two launches: kPartials reduces each slice and stores the block's pair in g_typed_spread; kApply
// reads every pair of its row (one a thread), merges them (every block of the row in the same
// order, so all get the same bits) and writes its slice.
constexpr int kTypedTwoPassThreads = 512;
enum class TypedPass { kWhole, kPartials, kApply };

// typed_spread's pairs, (max, sum) forward or (dot, 0) backward, part p of row r at r * parts + p.
// One area a device in each dtype's file (static: typed_f32.cu, typed_f16.cu and typed_bf16.cu
// each have their own); the launcher keeps spread launches on different streams apart.
constexpr int kTypedSpreadPairs = 1 << 16;
static __device__ float2 g_typed_spread[kTypedSpreadPairs];

template <typename T, int kVec, bool kBackward, TypedPass kPass = TypedPass::kWhole>
__global__ void __launch_bounds__(kTypedTwoPassThreads)
    typed_two_pass_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                          int rows, int cols, int parts) {
  constexpr int kThreads = kTypedTwoPassThreads;
  // Packs a thread has in flight per step: four of one stream, two of each of two (more spilled).
  constexpr int kTypedUnroll = kBackward ? 2 : 4;
  __shared__ float2 pairs[kThreads / kWarpSize];
  __shared__ float slots[kThreads / kWarpSize];
  const int t = threadIdx.x;
  const int64_t units = int64_t(rows) * parts;
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t row = unit / parts;
    const int part = static_cast<int>(unit % parts);
    const int64_t offset = row * cols;
    const TypedSplit<T, kVec> s(a + offset, cols, true);
    const auto* a_body = reinterpret_cast<const Pack<T, kVec>*>(a + offset + s.head);
    const auto* b_body = reinterpret_cast<const Pack<T, kVec>*>(b + offset + s.head);
    auto* o_body = reinterpret_cast<Pack<T, kVec>*>(out + offset + s.head);
    const int64_t tail_at = offset + s.head + int64_t(s.body) * kVec;
    // This block's slice of the body, [begin, end) (all of it with one part).
    const int64_t body = s.body, chunk = (body + parts - 1) / parts;
    const int64_t begin = part * chunk < body ? part * chunk : body;
    const int64_t end = begin + chunk < body ? begin + chunk : body;
    // The head and tail element this thread owns (kVec - 1 < kThreads: at most one of each).
    const bool has_head = kVec > 1 && part == 0 && t < s.head;
    const bool has_tail = kVec > 1 && part == 0 && t < s.tail;

    float m = -INFINITY, acc = 0.f;
    if constexpr (kPass != TypedPass::kApply) {
      // Pass 1. The pack index is 64-bit: with one element an access a row has up to 2^31 - 1
      // packs, and a 32-bit index stepped past the last would wrap.
      auto take = [&](float va, float vb) {
        if constexpr (kBackward) {
          acc = fmaf(va, vb, acc);
        } else {
          float one[1] = {va};
          online_add(m, acc, one);
        }
      };
      for (int64_t i0 = begin + t; i0 < end; i0 += kThreads * kTypedUnroll) {
        Pack<T, kVec> pa[kTypedUnroll], pb[kTypedUnroll];
#pragma unroll
        for (int u = 0; u < kTypedUnroll; ++u) {
          const int64_t i = i0 + u * kThreads;
          if (i < end) {
            pa[u] = a_body[i];
            if constexpr (kBackward) pb[u] = b_body[i];
          }
        }
#pragma unroll
        for (int u = 0; u < kTypedUnroll; ++u) {
          if (i0 + u * kThreads >= end) break;
          if constexpr (kBackward) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) take(Elem<T>::in(pa[u].v[e]), Elem<T>::in(pb[u].v[e]));
          } else {
            float v[kVec];
#pragma unroll
            for (int e = 0; e < kVec; ++e) v[e] = Elem<T>::in(pa[u].v[e]);
            online_add(m, acc, v);
          }
        }
      }
      if (has_head) take(Elem<T>::in(a[offset + t]), kBackward ? Elem<T>::in(b[offset + t]) : 0.f);
      if (has_tail) {
        take(Elem<T>::in(a[tail_at + t]), kBackward ? Elem<T>::in(b[tail_at + t]) : 0.f);
      }
    } else {
      // The row's pairs, one a thread (parts <= kThreads); the rest neutral.
      if (t < parts) {
        const float2 q = g_typed_spread[row * parts + t];
        m = kBackward ? -INFINITY : q.x;
        acc = kBackward ? q.x : q.y;
      }
    }
    float scale_by = 0.f;  // forward: 1 / sum; backward: the dot product
    if constexpr (kBackward) {
      scale_by = block_all_reduce<kThreads, false>(acc, slots);
    } else {
      block_reduce_pair<kThreads>(m, acc, pairs);
      scale_by = reciprocal(acc);
    }
    if constexpr (kPass == TypedPass::kPartials) {
      if (t == 0)
        g_typed_spread[unit] = kBackward ? make_float2(scale_by, 0.f) : make_float2(m, acc);
      __syncthreads();  // `pairs` and `slots` are rewritten by the next unit
      continue;
    }
    auto result = [&](float va, float vb) {
      if constexpr (kBackward) {
        return va * (vb - scale_by);
      } else {
        return exp_(va - m) * scale_by;
      }
    };

    // Pass 2.
    for (int64_t i0 = begin + t; i0 < end; i0 += kThreads * kTypedUnroll) {
      Pack<T, kVec> pa[kTypedUnroll], pb[kTypedUnroll];
#pragma unroll
      for (int u = 0; u < kTypedUnroll; ++u) {
        const int64_t i = i0 + u * kThreads;
        if (i < end) {
          pa[u] = a_body[i];
          if constexpr (kBackward) pb[u] = b_body[i];
        }
      }
#pragma unroll
      for (int u = 0; u < kTypedUnroll; ++u) {
        const int64_t i = i0 + u * kThreads;
        if (i >= end) break;
        Pack<T, kVec> po;
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          po.v[e] = Elem<T>::out(
              result(Elem<T>::in(pa[u].v[e]), kBackward ? Elem<T>::in(pb[u].v[e]) : 0.f));
        }
        o_body[i] = po;
      }
    }
    if (has_head) {
      out[offset + t] = Elem<T>::out(
          result(Elem<T>::in(a[offset + t]), kBackward ? Elem<T>::in(b[offset + t]) : 0.f));
    }
    if (has_tail) {
      out[tail_at + t] = Elem<T>::out(
          result(Elem<T>::in(a[tail_at + t]), kBackward ? Elem<T>::in(b[tail_at + t]) : 0.f));
    }
    // The next row (when the grid is smaller than the rows) reuses `pairs` and `slots`: every
    // thread must be past this row's reads of them.
    __syncthreads();
  }
}

}  // namespace fastsoftmax::detail
