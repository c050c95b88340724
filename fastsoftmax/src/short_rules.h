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

// How many waves of path (a)/(b) blocks a matrix of `rows` rows makes with this mapping, in
// twentieths: work blocks of one row per group against the blocks of that kernel resident on the
// GPU (the row length enters through kPacks and kAligned).
// Blocks of kWarpThreads threads for one row per group of kGroup lanes.
template <int kGroup>
inline int64_t group_blocks(int rows) {
  constexpr int kRowsPerBlock = kWarpThreads / kGroup;
  return (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
}

template <int kGroup, int kPacks, bool kAligned>
inline int64_t twentieths_of_waves(int rows) {
  const auto one_row = warp_rows_kernel<kGroup, kPacks, false, kAligned>;
  const int64_t resident =
      int64_t(device_info().sms) * std::max(1, blocks_per_sm(one_row, kWarpThreads, 0));
  return 20 * group_blocks<kGroup>(rows) / resident;
}

// Whether rows x cols makes enough waves of path (a)/(b) blocks with this mapping to leave the
// persistent grid: 1.5 (step07's rule); 3 for a warp per row at 5-9 slots a lane, where the
// persistent grid with the next row in flight measured up to 0.06 of memcpy faster than one row
// per group up to about 3 waves (8192-16384 rows of 640-1152 floats), and at 8-9 slots
// 0.005-0.02 slower from 3.4 waves on (docs/notes/step08.md, change 15); 0.75 for a warp per
// aligned row of 57-64 slots (N = 228-256), where one row per warp measured 0.5-4% faster from
// 0.80 to 1.3 waves (6800x256 to 11000x228), level at 0.76 and the persistent grid 1% faster at
// 0.73 (6144x256); rows of 56 slots and fewer lost 0.5-2% with it (7000x168 to 6400x224), so
// they keep 1.5 (change 22; since change 33 path (b4) takes these rows below one wave of its
// warps and 64 KB an SM, 8448 rows of 228 floats and 8447 of 256 on an H100, so the rule acts from
// there to 1.5 waves). (Aligned rows of 4 slots a lane at 1 wave were tried and not kept: 0.5-2%
// faster at 400-448 floats, 1-1.5% slower at 8192x512 and 9216x512; change 23.)
template <int kGroup, int kPacks, bool kAligned>
inline bool many_waves(int rows, int cols) {
  constexpr bool kWarp = kGroup == kWarpSize;
  const bool early = kWarp && kPacks == 2 && kAligned && cols >= 4 * 57;
  const int threshold = kWarp && kPacks >= 5 ? 60 : early ? 15 : 30;
  return twentieths_of_waves<kGroup, kPacks, kAligned>(rows) >= threshold;
}

// Whether unaligned rows of 69-131 floats (N % 4 != 0; 17-32 body slots) take 16 lanes a row, two
// float4 each, one row a group and no persistent grid: on matrices of 0.7 to 1.1 waves of those
// blocks (twentieths 14-21; on an H100, 16 blocks an SM, 11825 to 18584 rows). There (b4) or the
// tiles (a') took them, and this mapping measured 2-6% faster at 12000, 15000 and 18000 rows of
// 70, 101, 127 and 131 floats, where cuDNN was up to 5.9% ahead of them (15000x127). Outside the
// band it was not kept: at 9000 rows from 6% faster to 3% slower by N (and b4 faster still at 127
// and 131: strided_below_band), at 24000 rows 2-6% slower at 70-127 (docs/notes/step08.md,
// change 35). Rows of 69-85 floats take it from 0.55 waves (twentieth 11; 9289 rows on an H100),
// where (b4) took them: there it measured 0.951-1.000 of the library's time ((b4)'s) at 9300-11700
// rows of 69-85 floats, where cuDNN had led by up to 3.2%; at 9000 rows (twentieth 10) it was
// 0.977-1.018 by N (change 37).
inline bool half_warp_rows(int rows, int cols) {
  if (cols % 4 == 0 || cols < 69 || cols > 131) return false;
  const int64_t t = twentieths_of_waves<16, 2, false>(rows);
  return t >= (cols <= 85 ? 11 : 14) && t <= 21;
}

// Whether aligned rows of 72-124 floats (18-31 slots) take 16 lanes a row, two float4 each, one row
// a group: on matrices of 0.8 to 1.05 waves of those blocks (twentieths 16-20; on an H100 13513
// to 17736 rows), where groups of 8 lanes with 4 slots each, one row a group, took them (path a
// past 1.5 waves of one-slot warps). In side runs that mapping took 1.005-1.030 times this one's
// time at 34 timings of 14000-16000 rows of 72-124 floats, where cuDNN (two rows a warp) led at
// 24 of them, and 0.991-1.041 at 15 timings of 17000-17500 rows (0.991 at 17500x96), where cuDNN
// led at 17000 rows of 84 and 100-124 floats. At 13000 rows (twentieth 15) this one ranged from
// 2.6% slower (76 floats) to 2.9% faster, at 18500-20000 (twentieths 21-23) up to 3.8% slower at
// 96 floats (docs/notes/step08.md, change 38). Rows that (b4) takes (under 31 KB of input an SM)
// stay with it.
inline bool half_warp_aligned_rows(int rows, int cols) {
  if (cols % 4 != 0 || cols < 72 || cols > 124) return false;
  const int64_t t = twentieths_of_waves<16, 2, true>(rows);
  return t >= 16 && t <= 20;
}

// Whether unaligned rows of 86-131 floats below that band (fewer than 14 twentieths of a wave of
// the 16-lane blocks: up to 11824 rows on an H100) take path (b4) past its own reach, where the
// tiles (a') or path (a) took them. strided_reach already gives (b4) matrices under 31 KB of
// input an SM and, under 64 KB, up to one wave of its warps (8448 rows on an H100), so on an H100
// this acts from 8449 rows at 127-131 floats, from 11264 at 93, and never at 86-88 (11824 rows
// of 88 floats are still under 31 KB an SM). Past both and up to the band, (b4) measured
// 0.900-0.962 of the library's time at 9000-11700 rows of 93-131 floats, the 16-lane groups
// 0.932-0.983 (docs/notes/step08.md, change 36). Below 86 floats the rows up to the band are all
// under 31 KB an SM on an H100 (11824 rows of 85 floats are 4.02 MB, under 4.19).
inline bool strided_below_band(int rows, int cols) {
  if (cols % 4 == 0 || cols < 86 || cols > 131) return false;
  return twentieths_of_waves<16, 2, false>(rows) < 14;
}

// Whether (b4) takes a matrix (rows of 33-1024 floats): under 31 KB of input an SM
// (latency_bound), or under 64 KB an SM (8.65 MB on 132 SMs) when the GPU holds a warp of the
// kernel for this row length for every row at once (8448 warps on an H100 up to 416 floats a
// row, 4752 at 768, 3696 at 1024: the kernel's registers decide; from about 420 floats the 64 KB
// bound is the tighter). Against paths (a) and (b)
// (docs/notes/step08.md, change 33): 0.5-4% faster at 4096-8400 rows of 256-388 floats and at
// 2048x1024 (31-64 KB an SM), level at 4096x485 and 4096x512; at 70-109 KB an SM from 3.5% ahead
// (4096x640) to 8% behind (4000x900); past one wave of its warps 1-5% behind (16384x512 to
// 4096x1024, 12288x384 and 8192x768 among them).
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
