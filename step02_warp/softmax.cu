// SPDX-License-Identifier: MIT
// step02_warp: one warp per row; lanes stride the row and merge their partials with shuffles.
//
// What changed: a row belongs to a warp instead of a thread. Lane l takes columns l, l+32,
//   l+64, ... so each iteration the 32 lanes read 32 neighbouring floats: one 128-byte request
//   instead of 32 scattered ones. Every lane keeps step01's online (max, sum) over its own
//   columns; the 32 partial pairs are then merged by a __shfl_xor_sync butterfly, after which
//   every lane holds the row's max and sum, and the normalise pass starts at once, no shared
//   memory involved.
// Mapping:  blockDim = 128 = 4 warps; grid-stride over rows with warp -> one row;
//           lane -> columns lane, lane+32, lane+64, ...
// Traffic:  reads 2 per element, writes 1: 12*M*N bytes modeled. The second read fetches what the
//           warp has just read; for short rows that is usually still in L2, so the DRAM traffic
//           measured for short rows can be nearer 8*M*N than the model says.
// Accuracy: the sums are float again (step00/01 needed double for one thread's N terms): a lane
//           adds N/32 terms and the 32 partial sums meet in a 5-level tree. A single float chain
//           per lane would still lose more the longer it ran, enough to leave the 1e-5
//           tolerance on some rows of a few hundred thousand columns. So a lane walks its row in
//           chunks of 8192 columns, 256 terms per lane each, and adds each chunk's (max, sum) to
//           its running pair with a compensated (Kahan) addition, which keeps what rounding
//           dropped and hands it on to the next: the error stays that of one 256-term chain
//           however long the row. The loop over a chunk is the plain one; the cost is one merge
//           per 256 elements of a lane, in registers.
// Limit:    32 lanes per row however long the row is: a 16K-column row is 512 dependent
//           load -> online-update iterations per lane, and 4096 rows make only 4096 warps, about
//           half of what 132 SMs can hold. step03 gives each row a whole block.
// Run:      ./build/step02_warp/step02_warp          (--help for options)
#include "common/cuda_check.h"
#include "common/softmax.h"

namespace step02_warp {

constexpr int kThreads = 128;
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;
constexpr unsigned kFullMask = 0xffffffffu;
// Pass 1 walks a row in chunks of this many columns, kChunkCols / 32 = 256 per lane (see the
// header's Accuracy note).
constexpr int kChunkCols = 256 * kWarpSize;

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

// Adds a chunk's partial (part_max, part_sum) to the running (max_val, sum) as merge() does,
// but compensated (Kahan): `comp` holds what rounding dropped from the earlier additions
// (negated) and is taken off the next term, so the running sum's error does not grow with the
// number of chunks. The -inf and NaN rules are rescale()'s.
__device__ __forceinline__ void add_compensated(float& max_val, float& sum, float& comp,
                                                float part_max, float part_sum) {
  const float new_max = fmaxf(max_val, part_max);
  const float scale = rescale(max_val, new_max);
  const float term = part_sum * rescale(part_max, new_max) - comp * scale;
  const float scaled = sum * scale;
  const float new_sum = scaled + term;
  // (new_sum - scaled) is the part of term that the addition kept; less term, what it dropped.
  // Without -use_fast_math the compiler keeps this order of operations.
  comp = (new_sum - scaled) - term;
  sum = new_sum;
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

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int rows,
                               int cols) {
  const int lane = threadIdx.x % kWarpSize;
  // The row loop is the same for all 32 lanes of a warp, so every lane reaches every shuffle.
  for (int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize; row < rows;
       row += gridDim.x * kWarpsPerBlock) {
    const float* in = x + static_cast<size_t>(row) * cols;
    float* out = y + static_cast<size_t>(row) * cols;

    // Pass 1: each lane's online (max, sum) over its columns; neighbouring lanes read
    // neighbouring floats, so each iteration of the warp is one coalesced 128-byte read. Chunk
    // by chunk: a plain online pair per chunk, added to the row's running pair compensated.
    float max_val = -INFINITY;
    float sum = 0.f;
    float comp = 0.f;
    for (int start = 0; start < cols; start += kChunkCols) {
      const int end = start + min(kChunkCols, cols - start);
      float chunk_max = -INFINITY;
      float chunk_sum = 0.f;
      for (int c = start + lane; c < end; c += kWarpSize)
        online_update(chunk_max, chunk_sum, in[c]);
      add_compensated(max_val, sum, comp, chunk_max, chunk_sum);
    }
    sum -= comp;  // the correction still owed, before the partials are merged

    // A lane with no columns (cols < 32) holds (-inf, 0), which merges as a no-op.
    warp_reduce(max_val, sum);

    // Pass 2: normalise. An all -inf row has max -inf, so exp(NaN) makes it NaN, as in torch.
    const float inv_sum = 1.f / sum;
    for (int c = lane; c < cols; c += kWarpSize) out[c] = expf(in[c] - max_val) * inv_sum;
  }
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step02_warp", x, y, rows, cols, softmax::kNoColLimit);
  const int blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  softmax_kernel<<<blocks, kThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
}

int max_cols() { return softmax::kNoColLimit; }

softmax::Traffic traffic(int /*cols*/) { return {2, 1, 0, 0}; }

const softmax::Step& step() {
  static const softmax::Step s{"step02_warp", "one warp per row: coalesced loads, shuffle merge",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step02_warp
