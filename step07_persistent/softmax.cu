// SPDX-License-Identifier: MIT
// step07_persistent: a mapping sized to the row, the row in registers, persistent warps.
//
// What changed: step06 gives every row a 256-thread block that parks the row in shared memory.
//   Here the launcher picks a kernel by row length, and the row waits in registers instead:
//   warp_rows_kernel (up to 288 float4 slots, N <= 1155) a warp per row, persistent: the grid is
//   what the GPU holds at once, and each warp loops over rows with its next row's loads in
//   flight; block_rows_kernel (up to 4096 slots, N <= 16387) a block per row; two_pass_kernel,
//   the fallback for longer rows and for x and y at different 16-byte offsets, reads rows twice.
//   Rows of any N and alignment move as a scalar head, a float4 body and a scalar tail (step05's
//   split, in registers); exp and 1/x come from the special-function unit.
// Mapping:  warp w of W takes rows w, w + W, ...; lane l its body slots l, l + 32, ....
//           Block b of G takes rows b, b + G, ...; thread t slots t, t + T, ...; 0..2 the edges.
// Traffic:  up to 16387 columns 1 read, 1 write per element (8*M*N bytes); then 12*M*N.
// Limit:    DRAM bandwidth up to 16K columns. Past a block's registers the row is read twice:
//           one SM no longer holds a row well. step08 spreads a row over a cluster of SMs.
// Run:      ./build/step07_persistent/step07_persistent   (--help for options)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <type_traits>
#include <utility>

#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step07_persistent {

constexpr int kWarpSize = 32;

// ---- Arithmetic and reductions -----------------------------------------------------------------
// exp(x) = 2^(x * log2 e), 2^y from the special-function unit (ex2.approx.ftz): 2 instructions,
// not expf's dozen or so, which are most of a kernel's work once the row is in registers. It is
// __expf without the subnormal fix-up (results under 2^-126 come out 0): error 2 + 1.17*|x| ulp,
// under 3e-6 relative where exp(x) >= 1e-8; smaller results are inside the tests' 1e-8 absolute.
__device__ __forceinline__ float exp_(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

// 1 / s in one instruction (rcp.approx.ftz, within 1 ulp). A row sum is 0, >= 1, +inf or NaN,
// never subnormal: 1/0 = +inf, 1/inf = 0, NaN stays NaN, as with a division.
__device__ __forceinline__ float reciprocal(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return r;
}

// exp(part_max - max_val), which moves a partial sum onto a larger max. Equal maxima give 1 even
// when infinite: a part that saw only -inf keeps sum 0, never exp(-inf - -inf) = NaN.
__device__ __forceinline__ float rescale(float part_max, float max_val) {
  return part_max == max_val ? 1.f : exp_(part_max - max_val);
}

// step01's online softmax, a batch at a time: folds the partial (other_max, other_sum) into the
// running (max_val, sum), each sum taken against its own max.
__device__ __forceinline__ void merge(float& max_val, float& sum, float other_max,
                                      float other_sum) {
  const float new_max = fmaxf(max_val, other_max);
  sum = sum * rescale(max_val, new_max) + other_sum * rescale(other_max, new_max);
  max_val = new_max;
}

// Max (kMax) or sum over groups of kLanes lanes by a butterfly, xor kLanes/2, ..., 1: both lanes
// of a step get the same bits, so every lane ends with its group's result.
template <int kLanes, bool kMax>
__device__ __forceinline__ float butterfly(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  return v;
}

// step06's block reduction, result in every thread. Two per row use two `part` arrays, and then
// need no third barrier even in a loop over rows: a warp writes one array only after passing the
// other's barrier, which no warp reaches before it has read the first.
template <int kThreads, bool kMax>
__device__ __forceinline__ float block_all_reduce(float v, float* part) {
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  v = butterfly<kWarpSize, kMax>(v);
  if (lane == 0) part[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  return butterfly<kWarps, kMax>(part[lane % kWarps]);
}

// The max of kPacks items of kVec floats. fmaxf skips a NaN; exp brings it back into the sum.
template <int kPacks, int kVec>
__device__ __forceinline__ float max_of(const float (&v)[kPacks][kVec]) {
  float m = -INFINITY;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    float item_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kVec; ++j) item_max = fmaxf(item_max, v[p][j]);
    m = fmaxf(m, item_max);
  }
  return m;
}

// One exp per element against the row's max, kept in place for the store; returns their sum.
// Padding (-inf) gives 0; a row of only -inf (max -inf) comes out NaN, as in torch.
template <int K>
__device__ __forceinline__ float exp_in_place(float (&v)[K], float max_val) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < K; ++i) sum += v[i] = exp_(v[i] - max_val);
  return sum;
}
template <int kPacks, int kVec>
__device__ __forceinline__ float exp_in_place(float (&v)[kPacks][kVec], float max_val) {
  float sum = 0.f;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) sum += exp_in_place(v[p], max_val);
  return sum;
}

// ---- A row as head, body and tail --------------------------------------------------------------
//
//        16-byte boundaries:  |           |           |           |           |
//        memory (floats):     .  .  h  h  b  b  b  b  b  b  b  b  t  .  .  .
//                                   head  body (float4 slots 0, 1) tail
//
// head: the 0..3 floats before the first boundary (all of a row too short to reach one); body:
// whole float4 slots; tail: the 0..3 floats after them. A row has floor(N/4) slots or one fewer,
// whatever its start, so a kernel sized for N/4 serves every row. Threads 0..2 hold one head and
// one tail float each, -inf when missing. y is split like x: right only when both lie at the same
// offset from a boundary; the launcher sends other pairs to kVec = 1 (all body, no edges).
__device__ __forceinline__ int lead_of(const float* p) {  // floats past a boundary: 0..3
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(float) % 4);
}
template <int kVec, bool kAligned = false>
struct RowSplit {
  // kAligned: x is aligned and N % 4 == 0, so every row starts on a boundary: no edges at all.
  static constexpr bool kNoEdges = kVec == 1 || kAligned;
  size_t start;  // the row's first element from the matrix start (64-bit: M*N may pass 2^31)
  int head, body, tail_at, tail;  // head floats, body items, first tail float, tail floats

  __device__ __forceinline__ RowSplit(int lead, int64_t row, int cols)
      : start(static_cast<size_t>(row) * cols) {
    head = 0;
    if constexpr (!kNoEdges) {  // the row starts (lead_of(x) + row*N) % 4 floats past one
      const unsigned row_lead = (unsigned(lead) + unsigned(row) * unsigned(cols)) % 4;
      head = min(int((4 - row_lead) % 4), cols);  // unsigned wraps at 2^32, a multiple of 4
    }
    body = (cols - head) / kVec;
    tail_at = head + kVec * body;
    tail = cols - tail_at;
  }

  // Body item s is body_of(m)[s], dereferenced only for s < body.
  using Item = std::conditional_t<kVec == 4, float4, float>;
  __device__ const Item* body_of(const float* m) const {
    return reinterpret_cast<const Item*>(m + start + head);
  }
  __device__ Item* body_of(float* m) const { return reinterpret_cast<Item*>(m + start + head); }
};

// A body item into registers, or -inf padding when `in_row` is false (nothing is read).
__device__ __forceinline__ void load_item(const float4* p, bool in_row, float (&v)[4]) {
  const float4 t = in_row ? *p : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}
__device__ __forceinline__ void load_item(const float* p, bool in_row, float (&v)[1]) {
  v[0] = in_row ? *p : -INFINITY;
}

// A body item times `scale` to memory when `in_row`.
__device__ __forceinline__ void store_item(float4* p, bool in_row, float (&v)[4], float scale) {
  for (int j = 0; j < 4; ++j) v[j] *= scale;
  if (in_row) *p = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store_item(float* p, bool in_row, float (&v)[1], float scale) {
  if (in_row) *p = v[0] * scale;
}

// Head and tail float t of the row, held by thread (lane) t of the row's team.
template <int kVec, bool kAligned>
__device__ __forceinline__ void load_edges(const float* x, const RowSplit<kVec, kAligned>& r, int t,
                                           float& head, float& tail) {
  head = tail = -INFINITY;
  if constexpr (!RowSplit<kVec, kAligned>::kNoEdges) {
    if (t < r.head) head = x[r.start + t];
    if (t < r.tail) tail = x[r.start + r.tail_at + t];
  }
}
template <int kVec, bool kAligned>
__device__ __forceinline__ void store_edges(float* y, const RowSplit<kVec, kAligned>& r, int t,
                                            float head, float tail) {
  if constexpr (!RowSplit<kVec, kAligned>::kNoEdges) {
    if (t < r.head) y[r.start + t] = head;
    if (t < r.tail) y[r.start + r.tail_at + t] = tail;
  }
}

// ---- A warp per row ----------------------------------------------------------------------------
constexpr int kWarpThreads = 128;  // 4 independent warps a block: small blocks fill SMs evenly
constexpr int kWarpsPerBlock = kWarpThreads / kWarpSize;
constexpr int kWarpMaxPacks = 9;  // float4 a lane at most; longer rows go faster a block per row

// What a lane holds of a row: body slots lane, lane + 32, ..., a head and a tail float.
template <int kPacks>
struct LaneRow {
  float body[kPacks][4], head[1], tail[1];
};

// Issues every load of row `row` into v. A row past the last one loads nothing: v is all -inf.
template <int kPacks, bool kAligned>
__device__ __forceinline__ void load_row(const float* x, int lead, int64_t row, int rows, int cols,
                                         int lane, LaneRow<kPacks>& v) {
  RowSplit<4, kAligned> r(lead, row < rows ? row : 0, cols);
  if (row >= rows) r.head = r.body = r.tail = 0;
  const float4* in = r.body_of(x) + lane;
  const int left = r.body - lane;  // slot k of this lane is in the row when k * 32 < left
#pragma unroll
  for (int k = 0; k < kPacks; ++k) load_item(in + k * kWarpSize, k * kWarpSize < left, v.body[k]);
  load_edges(x, r, lane, v.head[0], v.tail[0]);
}

// The softmax of the row in v, to y. The max is known before any exponential is taken: one exp
// per element, no rescaling, the results kept in registers for the store.
template <int kPacks, bool kAligned>
__device__ __forceinline__ void softmax_row(LaneRow<kPacks>& v, float* y, int lead, int64_t row,
                                            int cols, int lane) {
  const float lane_max = fmaxf(max_of(v.body), fmaxf(v.head[0], v.tail[0]));
  const float max_val = butterfly<kWarpSize, true>(lane_max);
  const float lane_sum =
      exp_in_place(v.body, max_val) + exp_in_place(v.head, max_val) + exp_in_place(v.tail, max_val);
  const float inv_sum = reciprocal(butterfly<kWarpSize, false>(lane_sum));
  const RowSplit<4, kAligned> r(lead, row, cols);
  float4* out = r.body_of(y) + lane;
  const int left = r.body - lane;
#pragma unroll
  for (int k = 0; k < kPacks; ++k)
    store_item(out + k * kWarpSize, k * kWarpSize < left, v.body[k], inv_sum);
  store_edges(y, r, lane, v.head[0] * inv_sum, v.tail[0] * inv_sum);
}

// Persistent: a grid of what the GPU holds at once, two rounds of rows at least. Each warp walks
// the rows with a stride of all the grid's warps and issues its next row's loads before it
// reduces the current one: the shuffles, exps and stores of one row overlap the next row's trip
// from DRAM (twice the registers; "1 block an SM" leaves ptxas the budget). Every lane of a warp
// runs the same rows, so all 32 reach every shuffle. kAligned: no head, no tail (RowSplit).
template <int kPacks, bool kAligned>
__global__ void __launch_bounds__(kWarpThreads, 1)
    warp_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t stride = int64_t(gridDim.x) * kWarpsPerBlock;  // the grid's warps
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  LaneRow<kPacks> v;
  load_row<kPacks, kAligned>(x, lead, warp, rows, cols, lane, v);
  for (int64_t row = warp; row < rows; row += stride) {
    LaneRow<kPacks> next;
    load_row<kPacks, kAligned>(x, lead, row + stride, rows, cols, lane, next);
    softmax_row<kPacks, kAligned>(v, y, lead, row, cols, lane);
    v = next;
  }
}

// ---- A block per row ---------------------------------------------------------------------------
constexpr int kBlockMaxSlots = 256 * 16;  // 256 threads of 16 float4: N <= 16387

// The warp kernel a block wide: thread t loads slots t, t + kThreads, ..., threads 0..2 the edges,
// all before any is used; then max, exps, sum, store. Two or more blocks an SM: one loads while
// another reduces. One row per block, not persistent: the hardware hands an SM its next row the
// moment a block finishes, keeping every SM busy to the end (the loop makes any grid correct).
template <int kThreads, int kPacks, bool kAligned>
__global__ void __launch_bounds__(kThreads, 2)
    block_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float part_max[kThreads / kWarpSize], part_sum[kThreads / kWarpSize];
  const int tid = threadIdx.x;
  const int lead = lead_of(x);  // y's is the same (the launcher checks)
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const RowSplit<4, kAligned> r(lead, row, cols);
    const float4* in = r.body_of(x) + tid;
    const int left = r.body - tid;  // slot p of this thread is in the row when p * kThreads < left
    float v[kPacks][4], head[1], tail[1];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) load_item(in + p * kThreads, p * kThreads < left, v[p]);
    load_edges(x, r, tid, head[0], tail[0]);

    const float thread_max = fmaxf(max_of(v), fmaxf(head[0], tail[0]));
    const float max_val = block_all_reduce<kThreads, true>(thread_max, part_max);
    const float thread_sum =
        exp_in_place(v, max_val) + exp_in_place(head, max_val) + exp_in_place(tail, max_val);
    const float inv_sum = reciprocal(block_all_reduce<kThreads, false>(thread_sum, part_sum));
    float4* out = r.body_of(y) + tid;
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
      store_item(out + p * kThreads, p * kThreads < left, v[p], inv_sum);
    store_edges(y, r, tid, head[0] * inv_sum, tail[0] * inv_sum);
  }
}

// ---- The fallback: a block per row, the row read twice ----------------------------------------
constexpr int kLongThreads = 512;
constexpr int kBatch = 8;  // items a thread loads before it uses any

// Any N, persistent; kVec = 1 (4-byte items) for x and y at different offsets from a boundary.
// Pass 1 folds each batch into the thread's (max, sum): the batch max, the batch sum against it,
// one merge (two rescaling exps a batch, not one an element). step06's two reductions give the
// row's max and sum. Pass 2 reads the row again (from L2 if still there), normalises, stores.
template <int kVec>
__global__ void __launch_bounds__(kLongThreads)
    two_pass_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float part_max[kLongThreads / kWarpSize], part_sum[kLongThreads / kWarpSize];
  const int tid = threadIdx.x;
  const int lead = lead_of(x);  // used when kVec = 4, and then y's is the same
  // A -inf adds exactly 0; skipped, because against a max of -inf it would add NaN.
  const auto term = [](float v, float m) { return v == -INFINITY ? 0.f : exp_(v - m); };
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const RowSplit<kVec> r(lead, row, cols);
    const auto in = r.body_of(x);
    const auto out = r.body_of(y);
    float head, tail;
    load_edges(x, r, tid, head, tail);
    float max_val = fmaxf(head, tail);
    float sum = term(head, max_val) + term(tail, max_val);
    for (int64_t s = tid; s < r.body; s += kLongThreads * kBatch) {  // 64-bit: N up to 2^31 - 1
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        load_item(in + s + k * kLongThreads, k * kLongThreads < r.body - s, v[k]);
      const float batch_max = max_of(v);
      float batch_sum = 0.f;
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
#pragma unroll
        for (int j = 0; j < kVec; ++j) batch_sum += term(v[k][j], batch_max);
      merge(max_val, sum, batch_max, batch_sum);
    }
    const float row_max = block_all_reduce<kLongThreads, true>(max_val, part_max);
    // __fmul_rn: no FMA fused into the butterfly's first add, so all copies agree (step06).
    sum = __fmul_rn(sum, rescale(max_val, row_max));
    const float inv_sum = reciprocal(block_all_reduce<kLongThreads, false>(sum, part_sum));
    for (int64_t s = tid; s < r.body; s += kLongThreads * kBatch) {
      float v[kBatch][kVec];
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        load_item(in + s + k * kLongThreads, k * kLongThreads < r.body - s, v[k]);
      exp_in_place(v, row_max);
#pragma unroll
      for (int k = 0; k < kBatch; ++k)
        store_item(out + s + k * kLongThreads, k * kLongThreads < r.body - s, v[k], inv_sum);
    }
    store_edges(y, r, tid, exp_(head - row_max) * inv_sum, exp_(tail - row_max) * inv_sum);
  }
}

// ---- The launcher ------------------------------------------------------------------------------
using KernelFn = void (*)(const float*, float*, int, int);

// Blocks of `kernel` the device holds at once (SMs x the occupancy calculator's blocks per SM),
// asked once per host thread, device and kernel: a launch of microseconds cannot afford more.
int64_t resident_blocks(KernelFn kernel, int threads) {
  thread_local std::map<std::pair<int, const void*>, int64_t> cache;  // per thread: no lock
  int device = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int64_t& blocks = cache[{device, reinterpret_cast<const void*>(kernel)}];
  if (blocks == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    blocks = int64_t(sms) * std::max(per_sm, 1);
  }
  return blocks;
}

// The persistent launch of `work` blocks' worth of rows: at most what the GPU holds at once, in
// balanced rounds, at least `min_rounds`. (4096 rows on 132 resident blocks of one row a round:
// 4 blocks would take a 32nd row while 128 idle; 128 blocks of 32 rows finish together.)
void launch_persistent(KernelFn kernel, int threads, int64_t work, int64_t min_rounds,
                       const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const int64_t resident = resident_blocks(kernel, threads);
  const int64_t rounds = std::max((work + resident - 1) / resident, min_rounds);
  kernel<<<static_cast<unsigned>((work + rounds - 1) / rounds), threads, 0, stream>>>(x, y, rows,
                                                                                      cols);
  CUDA_CHECK_LAUNCH();
}

// Calls f(std::integral_constant<int, P>) for the smallest P in [kLo, kHi] with packs <= P: one
// kernel per count of float4 a lane or thread holds, no exps wasted on padding slots.
template <int kLo, int kHi, typename F>
void with_packs(int64_t packs, F&& f) {
  if constexpr (kLo < kHi) {
    if (packs > kLo) return with_packs<kLo + 1, kHi>(packs, f);
  }
  f(std::integral_constant<int, kLo>{});
}

// Rows of up to kBlockMaxSlots slots, in registers: a warp per row (at least 2 rounds: a next
// row to load), else a block per row, 128 threads while 16 float4 a thread hold the row, then
// 256 (one block per row is a legal grid for any int rows: gridDim.x < 2^31).
template <bool kAligned>
void launch_in_registers(int64_t slots, const float* x, float* y, int rows, int cols,
                         cudaStream_t stream) {
  if (slots <= kWarpSize * kWarpMaxPacks) {
    const int64_t work = (int64_t(rows) + kWarpsPerBlock - 1) / kWarpsPerBlock;
    return with_packs<1, kWarpMaxPacks>((slots + kWarpSize - 1) / kWarpSize, [&](auto p) {
      const KernelFn kernel = warp_rows_kernel<decltype(p)::value, kAligned>;
      launch_persistent(kernel, kWarpThreads, work, 2, x, y, rows, cols, stream);
    });
  }
  if (slots <= 128 * 16) {
    return with_packs<3, 16>((slots + 127) / 128, [&](auto p) {
      block_rows_kernel<128, decltype(p)::value, kAligned>
          <<<rows, 128, 0, stream>>>(x, y, rows, cols);
      CUDA_CHECK_LAUNCH();
    });
  }
  with_packs<9, 16>((slots + 255) / 256, [&](auto p) {
    block_rows_kernel<256, decltype(p)::value, kAligned>
        <<<rows, 256, 0, stream>>>(x, y, rows, cols);
    CUDA_CHECK_LAUNCH();
  });
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step07_persistent", x, y, rows, cols, softmax::kNoColLimit);
  const auto ux = reinterpret_cast<uintptr_t>(x), uy = reinterpret_cast<uintptr_t>(y);
  if ((ux - uy) % 16 != 0)  // no split fits both x and y: 4-byte items
    return launch_persistent(two_pass_kernel<1>, kLongThreads, rows, 1, x, y, rows, cols, stream);
  const int64_t slots = cols / 4;  // the most body slots a row can have, whatever its start
  if (slots > kBlockMaxSlots)
    return launch_persistent(two_pass_kernel<4>, kLongThreads, rows, 1, x, y, rows, cols, stream);
  if (ux % 16 == 0 && cols % 4 == 0)
    return launch_in_registers<true>(slots, x, y, rows, cols, stream);
  launch_in_registers<false>(slots, x, y, rows, cols, stream);
}

int max_cols() { return softmax::kNoColLimit; }

// Rows past a block's registers are read twice (x and y assumed at the same 16-byte offset).
softmax::Traffic traffic(int cols) {
  if (cols / 4 > kBlockMaxSlots) return {2, 1, 0, 0};
  return {1, 1, 0, 0};
}

const softmax::Step& step() {
  static const softmax::Step s{
      "step07_persistent", "rows handed out persistently, a mapping by row length, float4 at any N",
      launch, max_cols, traffic};
  return s;
}

}  // namespace step07_persistent
