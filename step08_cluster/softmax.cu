// SPDX-License-Identifier: MIT
// step08_cluster: rows longer than one SM holds, and few rows, split over several SMs.
//
// What changed: step07 gives a row at most one block, so a row past ~16K floats no longer fits in
// one SM's registers (it went through shared memory, one row per block with nothing overlapping
// its load, or was read twice), and a matrix of few rows left most SMs idle. Here such rows are
// split over K CTAs on K SMs (split_rows.cuh draws it): each CTA holds its part in registers, the
// K CTAs exchange one (max, sum) pair each, and every element is read once and written once.
// On Hopper, K <= 16 CTAs form a thread block cluster and exchange through distributed shared
// memory (path g); rows that need more CTAs, and few rows of more than 8 CTAs' worth, exchange
// through global memory inside a cooperative grid (path h). Everything else is step07's, copied
// forward (diff -r step07_persistent step08_cluster).
//
// The dispatch, by B = N/4 (rounded down), the most float4 body slots a row can have:
//
// | path | B             | N          | mapping                                  | file           |
// | (g)  | > 4096, <= 16 CTAs' worth (*) | a cluster of K = 2..16 CTAs per row | split_rows.cuh |
// | (h)  | > 16 CTAs' worth, up to the GPU | K CTAs of a cooperative grid per row | split_rows.cuh |
// | (i)  | few rows (h) takes in 2+ rounds; up to twice | (h) with each part half held in   |
// |      | what (h) holds | shared memory, one round of rows                  | split_rows.cuh |
// | (a1) | N = 1         | 1          | the matrix as one vector, 4 rows a float4 | single_rows.cuh |
// | (a2) | N = 2, x 8-byte aligned | 2 | the same, 2 rows a float4   | single_rows.cuh |
// | (a') | unaligned (^) | 2..131   | tiles of rows via shared memory, 1-16    | tile_rows.cuh  |
// |      | 2.5-6.8 tiles/SM (by N) |  | lanes a row (many rows only)             |                |
// |      | aligned, N % 8 == 4, 5.9 tiles/SM | 20..124 | the same (change 41)   | tile_rows.cuh  |
// | (b4) | small matrix (+) | 33..1024 | a warp per row, 4-byte accesses, lane l | warp_rows.cuh |
// |      |               |            | holding l, l + 32, ...; one row a warp   |                |
// | (a)  | <= 32         | <= 131     | G = 1..32 lanes per row, one slot each;  | warp_rows.cuh  |
// |      |               |            | many rows: 4-8 lanes, 2-4 slots each     |                |
// |      | 17..32, around one wave (++) | 69..131 | 16 lanes a row, 2 slots each | warp_rows.cuh |
// | (b)  | <= 288 (***)  | <= 1155    | a warp per row, P = 2..9 slots a lane    | warp_rows.cuh  |
// | (c)  | <= 4096       | <= 16387   | a block per row, in registers            | block_rows.cuh |
// | (d)  | fits in smem  | <= ~58K    | a block per row, in shared memory (**)   | long_rows.cuh  |
// | (e)  | longer        |            | a block per row, read twice              | long_rows.cuh  |
// | (f)  | x, y not aligned alike     | (e) with 4-byte accesses                 | long_rows.cuh  |
// (*) with rows for a round of clusters; fewer rows of at most 8 CTAs' worth take clusters of up
//     to 8, and fewer rows of more take (h). Matrices of B = 2048..16384 whose rows all fit in
//     one round of clusters of 2-16 CTAs of 128 threads (9-16 past 8192), at most 8 CTAs an SM,
//     take those, one row each (changes 18, 19, 24 and 28).
// (**) only without clusters: on sm_90 these rows take (g).
// (^) rows of two floats only off an 8-byte boundary: on it they take (a2).
// (+) under 31 KB of input an SM (latency_bound), or under 64 KB with every row's warp resident
//     at once (strided_reach), or unaligned rows of 86-131 floats below (++)'s band
//     (strided_below_band, change 36); not 1-7 rows of more than 768 floats, nor more than 32
//     rows an SM of 33-64 floats.
// (***) aligned rows; others up to 256 (N <= 1027, P <= 8), then (c) (in blocks of 64 threads
//       up to 288 slots).
// (++) rows of N % 4 != 0 on matrices of 0.7 to 1.1 waves of those blocks (half_warp_rows),
//      ahead of (b4) and (a') (change 35); from 0.55 waves at 69-85 floats (change 37); and
//      aligned rows of 72-124 floats at 0.8 to 1.05 waves (half_warp_aligned_rows, change 38).
// step07's paths, changed in these ways (docs/notes/step08.md, changes 14, 15, 17, 22, 23, 25,
// 39, 40 and 41):
// (***); a warp per row at 5-9 slots a lane keeps the persistent grid up to 3 waves of blocks,
// not 1.5, a warp per aligned row of 57-64 slots leaves it from 0.75 waves, and a warp per
// unaligned row of 4 slots a lane keeps the next row in flight from 0.9 waves; (a) and (b) on
// matrices of under 31 KB an SM take one row per group, no persistent grid; (a') takes unaligned
// rows of 2-16 floats too (of two only off an 8-byte boundary: on it they take a2), one lane a
// row, from 2.5-6.8 tiles an SM by the row's length
// (tile_start_tenths, change 40), and aligned rows of an odd number of float4 (20-124 floats)
// from 5.9 tiles an SM (use_aligned_tiles, change 41); and (c) in blocks of 128 threads on at
// most one row an SM takes a chain of one barrier (block_rows.cuh), except on unaligned rows of
// 8-10 slots a thread (change 39). Rows of one float take (a1), at any number of rows (change 18:
// 0.95 of memcpy or more from 1000 to 67M rows in the first side run, 0.92-0.99 at the latency
// floor in later ones; (a) and (a') ran at 0.57-0.94 between 131072 and 4194304 rows). Rows of
// two floats on an 8-byte boundary take (a2), at any number of rows up to 2^30 - 1 (change 43:
// ahead of step07's path (a) by 0-37% and of cuDNN by 0-41% from 971 to 30M rows, where cuDNN
// had led by one to four timer steps below 100000 rows).
//
//   (g) and (h) need clusters (sm_90; split.cu's plan_split says which shapes take them and
//   why): without them, and for rows longer than the whole GPU holds in registers and stages
//   (about 8.6M floats on an H100), every shape runs step07's paths (a)-(f) and this step's (a1),
//   (a2) and (b4); the reasons for (a)-(f) follow.
//   (a) a full warp on a row of 32 floats would
//   leave 24 of 32 lanes idle; on many rows, fewer lanes with 2-4 slots each measured 1-3% faster
//   than one slot a lane (change 18). (a') unaligned rows of 17-131 floats lose more to the
//   per-row head and tail than a tile copy through shared memory costs (change 15), on matrices
//   with enough
//   tiles to fill the GPU (change 17: 0.95-1.00 of memcpy from 65536 rows, where (a) ran at
//   0.86-0.93; fewer tiles, (a) is faster). (b) and the 32-lane groups
//   of (a) keep the next row's loads in flight while they reduce the current one (change 13),
//   except at 4 slots per lane (one wave measured faster; unaligned rows from 0.9 waves of blocks
//   on have it, change 23); smaller groups measured better without
//   (change 14). Matrices of 1.5 waves of blocks or more (many short rows) skip the persistent
//   grid: one row per group, the hardware scheduler dealing out blocks, measured up to 6% faster
//   there (65536x32 and 64 within 1%) and up to 5% slower on 4096-row matrices (change 16). (c)
//   takes over at 289 slots, where a 128-thread block per row measured faster than a warp holding
//   10-16 slots a lane (change 15); one block per row, not persistent (change 7: the hardware
//   scheduler beat a persistent grid by 3-6%). (d)-(f) exist so that every N >= 1 works; rows that
//   long are the next step's subject. Matrices whose rows all start on a boundary (x aligned, N % 4
//   == 0) run (a)-(c) with head and tail compiled out (kAligned): the split's index arithmetic cost
//   up to 6% on short rows (change 14).
// Fast math: exp2 and 1/x from the special-function unit, without __expf's subnormal fix-up
//           (reduce.cuh says why the error fits the 1e-5 tolerance). No other.
// Traffic:  (a)-(d), (g)-(i) read 1 and write 1 per element, 8*M*N bytes, the ideal. (e) and (f)
//           read twice, 12*M*N bytes modeled.
// Run:      ./build/step08_cluster/step08_cluster   (--help for options)
#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>

#include "block_rows.cuh"
#include "common/softmax.h"
#include "launch.cuh"
#include "long_rows.cuh"
#include "single_rows.cuh"
#include "split.h"
#include "tile_rows.cuh"
#include "warp_rows.cuh"

namespace step08_cluster {

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
int64_t group_blocks(int rows) {
  constexpr int kRowsPerBlock = kWarpThreads / kGroup;
  return (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
}

template <int kGroup, int kPacks, bool kAligned>
int64_t twentieths_of_waves(int rows) {
  const auto one_row = warp_rows_kernel<kGroup, kPacks, false, kAligned>;
  const int64_t resident =
      int64_t(device_info().sms) * std::max(1, blocks_per_sm(one_row, kWarpThreads, 0));
  return 20 * group_blocks<kGroup>(rows) / resident;
}

// Path (a)/(b) with a block per group of rows, one row per group, and no persistent grid.
template <int kGroup, int kPacks, bool kAligned>
void launch_one_row_per_group(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const auto one_row = warp_rows_kernel<kGroup, kPacks, false, kAligned>;
  const auto blocks = static_cast<unsigned>(group_blocks<kGroup>(rows));
  one_row<<<blocks, kWarpThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH();
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
bool many_waves(int rows, int cols) {
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
bool half_warp_rows(int rows, int cols) {
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
bool half_warp_aligned_rows(int rows, int cols) {
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
bool strided_below_band(int rows, int cols) {
  if (cols % 4 == 0 || cols < 86 || cols > 131) return false;
  return twentieths_of_waves<16, 2, false>(rows) < 14;
}

// (a) and (b). A matrix of many waves of blocks (many_waves) gets a block per group of rows, one
// row per group, and the hardware's block scheduler (as path c); so does a matrix of under 31 KB
// an SM (latency_bound), where a second round of rows per block only lengthens the chain
// (docs/notes/step08.md, change 17: on the H100 100x100 4.13 us against 4.58-4.61, 2048x256
// 5.12-5.17 against 5.47; level at 8192x100, behind at 4096x256).
// The rest a persistent grid where, for whole warps at every slot count but 4, the next row is
// in flight (see the header). At 4 slots a lane unaligned rows have it in flight too from 0.9
// waves of blocks: 2-5% faster than without from 0.97 to 1.29 waves (6144-8192 rows of 450 and
// 509 floats), mixed at 0.81 (5120 rows: 3% faster at 509, 1.5% slower at 450), 1-1.5% slower
// at 0.65 (4096 rows; change 23).
template <int kGroup, int kPacks, bool kAligned>
void launch_warp_rows(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr bool kWarp = kGroup == kWarpSize;
  constexpr bool kNextInFlight = kPacks != 4 && kWarp;
  if (many_waves<kGroup, kPacks, kAligned>(rows, cols) || latency_bound(rows, cols))
    return launch_one_row_per_group<kGroup, kPacks, kAligned>(x, y, rows, cols, stream);
  const int64_t work_blocks = group_blocks<kGroup>(rows);
  if constexpr (kWarp && kPacks == 4 && !kAligned) {
    if (twentieths_of_waves<kGroup, kPacks, kAligned>(rows) >= 18) {
      return launch_persistent(warp_rows_kernel<kGroup, kPacks, true, kAligned>, kWarpThreads, 0,
                               work_blocks, x, y, rows, cols, stream, 2);
    }
  }
  launch_persistent(warp_rows_kernel<kGroup, kPacks, kNextInFlight, kAligned>, kWarpThreads, 0,
                    work_blocks, x, y, rows, cols, stream, kNextInFlight ? 2 : 1);
}

// (a): one slot a lane, in groups of the smallest power of two of lanes that holds the row. On
// matrices of 1.5 waves of such blocks or more, rows of 5-32 slots take 2 or 4 slots a lane in
// groups of 4 or 8 lanes instead: a half to a quarter of the blocks, 32-64 bytes a lane in
// flight, and 1-2 fewer shuffle rounds per reduction (docs/notes/step07.md, change 18: 65536x128
// 1.02 of memcpy against 0.99, 65536x64 0.99 against 0.98; at 8192x128, under one wave, one
// float4 a lane stayed ahead, 0.94-0.95 against 0.92-0.93).
template <bool kAligned>
void launch_sub_warp(int64_t slots, const float* x, float* y, int rows, int cols,
                     cudaStream_t stream) {
  if (slots <= 1) return launch_warp_rows<1, 1, kAligned>(x, y, rows, cols, stream);
  if (slots <= 2) return launch_warp_rows<2, 1, kAligned>(x, y, rows, cols, stream);
  if (slots <= 4) return launch_warp_rows<4, 1, kAligned>(x, y, rows, cols, stream);
  if (slots <= 8) {
    if (many_waves<8, 1, kAligned>(rows, cols))
      return launch_warp_rows<4, 2, kAligned>(x, y, rows, cols, stream);
    return launch_warp_rows<8, 1, kAligned>(x, y, rows, cols, stream);
  }
  if (slots <= 16) {
    if (many_waves<16, 1, kAligned>(rows, cols))
      return launch_warp_rows<8, 2, kAligned>(x, y, rows, cols, stream);
    return launch_warp_rows<16, 1, kAligned>(x, y, rows, cols, stream);
  }
  if (many_waves<32, 1, kAligned>(rows, cols))
    return launch_warp_rows<8, 4, kAligned>(x, y, rows, cols, stream);
  return launch_warp_rows<32, 1, kAligned>(x, y, rows, cols, stream);
}

// (a1): one float4 slot (four rows) a thread, a block per 256 slots, no persistent grid. Measured
// against 2, 4 and 8 slots a thread, which gave fewer blocks: level or behind at every size from 1
// to 67M rows, by up to 0.18 of memcpy on small matrices (docs/notes/step08.md, change 18).
// (a2), rows of two floats on an 8-byte boundary, the same way: two rows a slot (change 43;
// takes_pairs in tile_plan.h says which).
template <int kCols>
void launch_single(const float* x, float* y, int rows, cudaStream_t stream) {
  // The body has at most this many (rows * kCols - head) / 4 slots.
  const int64_t slots = int64_t(rows) * kCols / 4 + 1;
  const int64_t blocks = (slots + kSingleThreads - 1) / kSingleThreads;
  single_rows_kernel<1, kCols>
      <<<static_cast<unsigned>(blocks), kSingleThreads, 0, stream>>>(x, y, rows);
  CUDA_CHECK_LAUNCH();
}

// (b4): a warp per row, ceil(N / 32) floats a lane in 4-byte accesses, one row a warp, no
// persistent grid (warp_rows.cuh says why).
void launch_strided(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = kWarpThreads / kWarpSize;
  const int64_t blocks = (int64_t(rows) + kWarpsPerBlock - 1) / kWarpsPerBlock;
  with_packs<2, kStridedMaxPer>((cols + kWarpSize - 1) / kWarpSize, [&](auto p) {
    strided_rows_kernel<decltype(p)::value>
        <<<static_cast<unsigned>(blocks), kWarpThreads, 0, stream>>>(x, y, rows, cols);
    CUDA_CHECK_LAUNCH();
  });
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
bool strided_reach(int rows, int cols) {
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

// (a'): one tile of rows per block, kGroup lanes per row, kPerLane = ceil(N / kGroup) elements
// a lane (the kernel relies on it being exact).
template <int kGroup, int kPerLane>
void launch_tile(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const int per_tile = tile_rows(cols, kGroup);
  const int64_t tiles = (int64_t(rows) + per_tile - 1) / per_tile;
  tile_rows_kernel<kGroup, kPerLane><<<static_cast<unsigned>(tiles), kTileThreads, 0, stream>>>(
      x, y, rows, cols, per_tile);
  CUDA_CHECK_LAUNCH();
}

// (a') for rows of kGroup*(kLo-1)+1 .. kGroup*kHi floats: kPerLane = ceil(N / kGroup).
template <int kGroup, int kLo, int kHi>
void launch_tiles(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  with_packs<kLo, kHi>((cols + kGroup - 1) / kGroup, [&](auto p) {
    launch_tile<kGroup, decltype(p)::value>(x, y, rows, cols, stream);
  });
}

// (c): kPacks slots per thread, just enough to cover the row (padding slots would cost exps).
// Blocks of 128 threads with at most one row an SM take the chain of one barrier (block_rows.cuh;
// with more rows it measured 1-3% slower, change 25), except unaligned rows of 8-10 slots a
// thread (about 3.6K-5.1K floats; timed at 3841-5003): there the one-barrier block measured
// level with step07's two reductions or up to 3.3% behind at 2-132 rows, in all but one of 72
// process-cells (change 39).
// Rows of blocks of 256 (8K-16K floats) that few take the small clusters on sm_90 (split.cu), so
// they keep one chain.
template <int kPacks, bool kAligned>
constexpr bool one_barrier_packs() {
  return kAligned || kPacks < 8 || kPacks > 10;
}

template <int kThreads, bool kAligned>
void launch_register_block(int64_t slots, const float* x, float* y, int rows, int cols,
                           cudaStream_t stream) {
  const int64_t packs = (slots + kThreads - 1) / kThreads;
  const bool one_barrier = rows <= device_info().sms;
  with_packs<3, 16>(packs, [&](auto p) {
    constexpr int kPacks = decltype(p)::value;
    if constexpr (kThreads == 128 && one_barrier_packs<kPacks, kAligned>()) {
      if (one_barrier) {
        register_block_kernel<kThreads, kPacks, kAligned, true>
            <<<rows, kThreads, 0, stream>>>(x, y, rows, cols);
        CUDA_CHECK_LAUNCH();
        return;
      }
    }
    register_block_kernel<kThreads, kPacks, kAligned><<<rows, kThreads, 0, stream>>>(x, y, rows,
                                                                                     cols);
    CUDA_CHECK_LAUNCH();
  });
}

// (d) may use the shared memory device_info() counted, past the 48 KB default: set once per device
// on `kernel` as this file launches it. The attribute belongs to the kernel that file's own
// launches reach: when launch.cuh's device_info() set it, from whichever file first asked for the
// device's facts, a process that had planned a split (split.cu) before its first path (d) launch
// failed that launch with an invalid argument (tests/test_step08.cpp,
// WithoutClustersServesEveryShape, now plans one first).
void allow_cache_bytes(KernelFn kernel) {
  static std::mutex mutex;
  static std::set<int> done;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const int bytes = device_info().cache_bytes;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done.insert(device).second) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// (e) and (f): a block per row.
template <int kVec>
void launch_two_pass(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  launch_persistent(two_pass_kernel<kLongRowThreads, kVec>, kLongRowThreads, 0, rows, x, y, rows,
                    cols, stream);
}

// (a)-(c): the row in registers. kAligned compiles the head and the tail out.
template <bool kAligned>
void launch_in_registers(int64_t slots, const float* x, float* y, int rows, int cols,
                         cudaStream_t stream) {
  // (b) holds 9 slots a lane on aligned rows, 8 on others. Unaligned rows of 257-288 slots take
  // (c) in blocks of 64 threads, 5 slots each: 0-0.03 of memcpy ahead of (b) on the H100,
  // within 0.015 of it either way on the H200; blocks of 128 (3 slots each) were as fast on the
  // H100 but 0.01-0.04 behind on the H200 (docs/notes/step08.md, change 14).
  constexpr int kMaxPacks = kAligned ? kWarpMaxPacks : kWarpMaxPacks - 1;
  if (slots <= kWarpSize) return launch_sub_warp<kAligned>(slots, x, y, rows, cols, stream);  // (a)
  if (slots <= kWarpSize * kMaxPacks) {                                                       // (b)
    return with_packs<2, kMaxPacks>((slots + kWarpSize - 1) / kWarpSize, [&](auto p) {
      launch_warp_rows<kWarpSize, decltype(p)::value, kAligned>(x, y, rows, cols, stream);
    });
  }
  if constexpr (!kAligned) {
    if (slots <= kWarpSize * kWarpMaxPacks) {  // (c), 64 threads
      register_block_kernel<64, 5, false><<<rows, 64, 0, stream>>>(x, y, rows, cols);
      CUDA_CHECK_LAUNCH();
      return;
    }
  }
  if (slots <= 128 * 16)
    return launch_register_block<128, kAligned>(slots, x, y, rows, cols, stream);
  launch_register_block<256, kAligned>(slots, x, y, rows, cols, stream);  // (c)
}

void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step08_cluster", x, y, rows, cols, softmax::kNoColLimit);
  const auto ux = reinterpret_cast<uintptr_t>(x), uy = reinterpret_cast<uintptr_t>(y);
  // (f) x and y do not share their 16-byte boundaries.
  if ((ux - uy) % 16 != 0) return launch_two_pass<1>(x, y, rows, cols, stream);
  if (cols == 1) return launch_single<1>(x, y, rows, stream);  // (a1)
  if (takes_pairs(ux, rows, cols)) return launch_single<2>(x, y, rows, stream);  // (a2)
  // (g) and (h): long rows, and few rows, over several SMs.
  const SplitPlan plan = plan_split(rows, cols);
  if (plan.path != Split::kNone) return launch_split(plan, x, y, rows, cols, stream);
  // (b4) rows of 33-1024 floats, any alignment, on a matrix loaded all at once (strided_reach),
  // and unaligned rows of 86-131 floats below the 16-lane band (strided_below_band);
  // not 1-7 rows of more than 768 floats, where one warp's 25-32 accesses a lane, one after
  // another, measured 1-5% behind step07's float4 slots (1-4 rows of 1001-1024; 7x766 and 8x1024
  // were 10-14% ahead of step07; against path (b), 8-32 rows of 800-1024 floats were level:
  // docs/notes/step08.md, changes 32 and 33); and rows of 33-64 floats only up to 32 rows an SM
  // (4224 on an H100): past that step07's paths (at 5144x44, path a: two rows a warp in groups of
  // 16 lanes) measured 3-13% faster (5144x44 to 12000x44), where up to 4000 rows (b4) was level
  // or up to 6% ahead (change 34).
  // (a) in groups of 16 lanes, one row each, on unaligned rows of 69-131 floats around one wave of
  // its blocks, from 0.55 waves at 69-85 floats (half_warp_rows): ahead of (b4) and the tiles
  // there.
  if (half_warp_rows(rows, cols))
    return launch_one_row_per_group<16, 2, false>(x, y, rows, cols, stream);
  const bool many_short_rows = cols <= 2 * kWarpSize && rows > 32 * device_info().sms;
  if (cols > kWarpSize && cols <= kWarpSize * kStridedMaxPer &&
      (strided_reach(rows, cols) || strided_below_band(rows, cols)) &&
      (rows >= 8 || cols <= 768) && !many_short_rows)
    return launch_strided(x, y, rows, cols, stream);
  // The most body slots a row can have, whatever its alignment: floor(N/4).
  const int64_t slots = cols / 4;
  const bool aligned = ux % 16 == 0 && cols % 4 == 0;
  // (a) in groups of 16 lanes, one row each, on aligned rows of 72-124 floats at 0.8 to 1.05
  // waves of its blocks (half_warp_aligned_rows).
  if (aligned && half_warp_aligned_rows(rows, cols))
    return launch_one_row_per_group<16, 2, true>(x, y, rows, cols, stream);
  // (a') also on aligned rows of an odd number of float4 (20-124 floats) on many rows
  // (use_aligned_tiles, change 41).
  if (takes_tiles(aligned, rows, cols, device_info().sms)) {  // (a')
    switch (tile_group(cols)) {
      case 1: return launch_tiles<1, 2, 16>(x, y, rows, cols, stream);  // N = 1 took (a1)
      case 2: return launch_tiles<2, 9, 16>(x, y, rows, cols, stream);
      case 4: return launch_tiles<4, 9, 16>(x, y, rows, cols, stream);
      case 8: return launch_tiles<8, 9, 16>(x, y, rows, cols, stream);
      default: return launch_tiles<16, 9, 9>(x, y, rows, cols, stream);
    }
  }
  if (slots <= 256 * 16) {
    if (aligned) return launch_in_registers<true>(slots, x, y, rows, cols, stream);
    return launch_in_registers<false>(slots, x, y, rows, cols, stream);
  }
  if (slots <= device_info().cache_slots) {  // (d)
    const KernelFn kernel = smem_block_kernel<kLongRowThreads>;
    allow_cache_bytes(kernel);
    return launch_persistent(kernel, kLongRowThreads, (slots + 8) * sizeof(float4), rows, x, y,
                             rows, cols, stream);
  }
  launch_two_pass<4>(x, y, rows, cols, stream);  // (e)
}

int path_d_blocks_per_sm(int64_t slots) {
  const KernelFn kernel = smem_block_kernel<kLongRowThreads>;
  allow_cache_bytes(kernel);
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, kernel, kLongRowThreads, static_cast<size_t>(slots + 8) * sizeof(float4)));
  return blocks;
}

int64_t path_d_pair_slots() { return device_info().pair_slots; }

int max_cols() { return softmax::kNoColLimit; }

// Rows that neither a split nor shared memory holds are read twice. (The model assumes x and y
// aligned alike: (h) and (i) take rows of up to the GPU's resident CTAs x 8192 slots.)
softmax::Traffic traffic(int cols) {
  const int64_t slots = cols / 4;
  if (slots <= device_info().cache_slots) return {1, 1, 0, 0};
  if (clusters_usable() && slots <= int64_t(device_info().sms) * 2 * 8192) return {1, 1, 0, 0};
  return {2, 1, 0, 0};
}

const softmax::Step& step() {
  static const softmax::Step s{"step08_cluster",
                               "long rows and few rows split over a thread block cluster or a grid",
                               launch, max_cols, traffic};
  return s;
}

}  // namespace step08_cluster
