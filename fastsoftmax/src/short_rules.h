// SPDX-License-Identifier: MIT
// fastsoftmax: the rules that pick a mapping for short rows (docs/library.md, "Short rows" and
// "The persistent grid and waves"). Host code; the kernels are in warp_rows.cuh.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "launch.cuh"
#include "warp_rows.cuh"

namespace fastsoftmax::detail {

// Calls f(std::integral_constant<int, P>) for the smallest P in [kLo, kHi] with packs <= P (kHi
// when none): one instantiation per slot count a lane or thread may hold.
template <int kLo, int kHi, typename F>
void with_packs(int64_t packs, F&& f) {
  if constexpr (kLo == kHi) {
    f(std::integral_constant<int, kLo>{});
  } else if (packs <= kLo) {
    f(std::integral_constant<int, kLo>{});
  } else {
    with_packs<kLo + 1, kHi>(packs, f);
  }
}

// Blocks of kWarpThreads threads that `rows` rows take at one row a group of kGroup lanes.
template <int kGroup>
inline int64_t group_blocks(int rows) {
  constexpr int kRowsPerBlock = kWarpThreads / kGroup;
  return (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
}

// How many waves of `sub_warp`/`warp` blocks a matrix of `rows` rows makes with this mapping, in
// twentieths: blocks of one row a group against the blocks of that kernel the GPU holds at once
// (the row length enters through kPacks and kAligned).
template <int kGroup, int kPacks, bool kAligned>
inline int64_t twentieths_of_waves(int rows) {
  const auto one_row = warp_rows_kernel<kGroup, kPacks, false, kAligned>;
  const int64_t resident =
      int64_t(device_info().sms) * std::max(1, blocks_per_sm(one_row, kWarpThreads, 0));
  return 20 * group_blocks<kGroup>(rows) / resident;
}

// Whether rows x cols makes enough waves of `sub_warp`/`warp` blocks with this mapping to leave
// the persistent grid for one row a group (docs/library.md, "The persistent grid and waves"):
// - 1.5 waves, the lessons' rule;
// - 3 for a warp a row at 5-9 float4 a lane: up to about 3 waves the next row in flight was up to
//   0.06 of memcpy faster (8192-16384 rows of 640-1152 floats), from 3.4 waves 0.005-0.02 slower
//   at 8-9 float4 (H100; on the H200 the rule costs up to 0.02 at 2-3 waves);
// - 0.75 for a warp on aligned rows of 57-64 slots (N = 228-256): one row a warp 0.5-4% faster
//   from 0.8 to 1.3 waves, the persistent grid 1% faster at 0.73 (H100); rows of 56 slots and
//   fewer lost 0.5-2% with it and keep 1.5. Below one wave of its warps and 64 KB an SM `strided`
//   takes these rows first, so the rule acts from there.
// Aligned rows of 4 float4 a lane from 1 wave were tried and dropped: 0.5-2% faster at 400-448
// floats, 1-1.5% slower at 8192x512 and 9216x512.
template <int kGroup, int kPacks, bool kAligned>
inline bool many_waves(int rows, int cols) {
  constexpr bool kWarp = kGroup == kWarpSize;
  const bool early = kWarp && kPacks == 2 && kAligned && cols >= 4 * 57;
  const int threshold = kWarp && kPacks >= 5 ? 60 : early ? 15 : 30;
  return twentieths_of_waves<kGroup, kPacks, kAligned>(rows) >= threshold;
}

// Whether unaligned rows of 69-131 floats (17-32 body slots) take `half_warp`: 16 lanes a row,
// two float4 each, one row a group, no persistent grid, on matrices of 0.7-1.1 waves of its
// blocks (twentieths 14-21: 11825-18584 rows on an H100, 16 blocks an SM). There `strided` and
// `tiles` had taken them, and it was 2-6% faster at 12000-18000 rows of 70-131 floats, where
// cuDNN had led by up to 5.9%. Outside the band it was not kept: at 9000 rows from 6% faster to
// 3% slower by N, at 24000 rows 2-6% slower. Rows of 69-85 floats take it from 0.55 waves
// (twentieth 11), where it took 0.951-1.000 of `strided`'s time. All H100. (docs/library.md,
// "Short rows")
inline bool half_warp_rows(int rows, int cols) {
  if (cols % 4 == 0 || cols < 69 || cols > 131) return false;
  const int64_t t = twentieths_of_waves<16, 2, false>(rows);
  return t >= (cols <= 85 ? 11 : 14) && t <= 21;
}

// Whether aligned rows of 72-124 floats (18-31 slots) take `half_warp`, one row a group, on
// matrices of 0.8-1.05 waves of its blocks (twentieths 16-20: 13513-17736 rows on an H100).
// There `sub_warp` had taken them in groups of 8 lanes of 4 float4, and took 1.005-1.030 times
// its time at 14000-16000 rows, 0.991-1.041 at 17000-17500. Outside the band it was not kept: at
// 13000 rows from 2.6% slower to 2.9% faster by N, at 18500-20000 up to 3.8% slower. Rows that
// `strided` takes (under 31 KB of input an SM) stay with it. All H100.
inline bool half_warp_aligned_rows(int rows, int cols) {
  if (cols % 4 != 0 || cols < 72 || cols > 124) return false;
  const int64_t t = twentieths_of_waves<16, 2, true>(rows);
  return t >= 16 && t <= 20;
}

// Whether unaligned rows of 86-131 floats below the `half_warp` band (under 14 twentieths of a
// wave of its blocks: up to 11824 rows on an H100) take `strided` past its own reach, where
// `tiles` or `sub_warp` had taken them: at 9000-11700 rows of 93-131 floats `strided` took
// 0.900-0.962 of their time, `half_warp` 0.932-0.983 (H100). strided_reach already covers under
// 31 KB of input an SM and, under 64 KB, one wave of its warps (8448 rows on an H100), so on an
// H100 this acts from 8449 rows at 127-131 floats and from 11264 at 93; at 88 floats and fewer
// every matrix up to the band is under 31 KB an SM already (11824x88 is 4.16 MB, under 4.19).
inline bool strided_below_band(int rows, int cols) {
  if (cols % 4 == 0 || cols < 86 || cols > 131) return false;
  return twentieths_of_waves<16, 2, false>(rows) < 14;
}

// Whether `strided` takes a matrix of rows of 33-1024 floats: under 31 KB of input an SM
// (latency_bound), or under 64 KB an SM (8.65 MB on 132 SMs) where the GPU holds a warp of this
// row length's kernel for every row at once (on an H100 8448 warps up to 416 floats a row, 4752
// at 768, 3696 at 1024: its registers decide; from about 420 floats the 64 KB bound is the
// tighter). Against `sub_warp` and `warp` (H100): 0.5-4% faster at 4096-8400 rows of 256-388
// floats and at 2048x1024 (31-64 KB an SM); at 70-109 KB an SM from 3.5% ahead to 8% behind;
// past one wave of its warps 1-5% behind. (docs/library.md, "Short rows")
inline bool strided_reach(int rows, int cols) {
  if (latency_bound(rows, cols)) return true;
  constexpr int64_t kBytesPerSm = 64 * 1024;
  const int sms = device_info().sms;
  if (int64_t(rows) * cols * int64_t(sizeof(float)) >= kBytesPerSm * sms) return false;
  int64_t warps = 0;
  with_packs<2, kStridedMaxPer>((cols + kWarpSize - 1) / kWarpSize, [&](auto p) {
    warps = int64_t(blocks_per_sm(strided_rows_kernel<decltype(p)::value>, kWarpThreads, 0)) *
            sms * (kWarpThreads / kWarpSize);
  });
  return rows <= warps;
}

}  // namespace fastsoftmax::detail
