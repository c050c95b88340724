// SPDX-License-Identifier: MIT
// step08_cluster, path (a'): how rows are grouped into tiles and which matrices take them (host
// code; the kernel is in tile_rows.cuh, which says what a tile is); and which rows of two floats
// take path (a2) instead (single_rows.cuh).
#pragma once

#include <cstdint>
#include <limits>

namespace fastsoftmax::detail {

constexpr int kTileThreads = 256;
constexpr int kTilePacks = 4;                          // float4 per thread per copy
constexpr int kTileSlots = kTileThreads * kTilePacks;  // 16 KB of rows per tile
constexpr int kTileFloats = 4 * kTileSlots;            // the longest tile

// Rows per tile for rows of `cols` floats (cols <= kTileFloats) and groups of `group` lanes: as
// many as fit, rounded down to a whole number of rounds (a row for every group of the block)
// when that leaves one round.
inline int tile_rows(int cols, int group) {
  const int round = kTileThreads / group;
  const int fit = kTileFloats / cols;
  return fit >= round ? fit / round * round : fit;
}

// Lanes per row: the fewest that hold the row in at most 16 elements a lane (9-16 from 17 floats
// on): 1 lane for 1-16 floats, 2 for 17-32, 4 for 33-64, 8 for 65-128, 16 for 129-131.
inline int tile_group(int cols) {
  return cols <= 16 ? 1 : cols <= 32 ? 2 : cols <= 64 ? 4 : cols <= 128 ? 8 : 16;
}

// Tiles per SM, in tenths, from which unaligned rows of `cols` floats take tiles. 2.5 for rows of
// 17-131 floats: fewer tiles leave SMs with one block or none, and the row-per-group path (a)
// measured faster there (docs/notes/step07.md, change 17: at 8192x127, 256 tiles, 0.880 of memcpy
// against 0.928; at 16384x127, 512 tiles, 0.943 against 0.904). Rows of 2-16 floats (one lane a
// row, 256-2048 rows a tile) start where the tiles measured level with step07's path (a) or
// ahead, which depends on the length (docs/notes/step08.md, change 40; shape scans on an H100,
// rows of N floats, tiles per SM where step07 was last ahead and where the tiles first were level
// or ahead): 3 floats 4.14 and 4.73, 5 floats 2.57 and 2.96, 6 floats 5.92 and 6.81, 7 floats
// 2.67 and 2.82, 9 floats 4.00 and 4.14, 10 floats 4.14 and 4.44; 11 floats were level from 4.14
// (0.996-1.009 of step07's speed) and take 10's start. At 2.5 tiles per SM rows of 2, 13 and 15
// floats were already ahead and 14 about level (0.977-1.005 in six processes). Rows of 4, 8, 12
// and 16 floats are unaligned only off their 16-byte boundary, and were not timed there: they
// keep 2.5.
inline int tile_start_tenths(int cols) {
  switch (cols) {
    case 3: return 47;
    case 5: return 29;
    case 6: return 68;
    case 7: return 28;
    case 9: return 41;
    case 10:
    case 11: return 44;
    default: return 25;
  }
}

// Whether unaligned rows of `cols` floats take tiles: 1-131 floats, and at least
// tile_start_tenths(cols) / 10 tiles per SM. Rows of 1-16 floats take tiles in step08 only
// (docs/notes/step08.md, change 17): path (a) has a lane or a few per row, each with 4-28 bytes in
// flight, and a block per 32-128 rows, and measured 0.41-0.84 of memcpy on matrices of 4M to 67M
// rows of 1, 2 and 7 floats, where one lane a row over tiles ran at 0.96-1.00. Rows of one float
// no longer come here: they take path (a1) (single_rows.cuh, change 18); nor rows of two on an
// 8-byte boundary: path (a2) (change 43).
inline bool use_tiles(int64_t rows, int cols, int sms) {
  if (cols > 131) return false;
  const int per_tile = tile_rows(cols, tile_group(cols));
  return 10 * ((rows + per_tile - 1) / per_tile) >= tile_start_tenths(cols) * int64_t(sms);
}

// Whether aligned rows (x on a 16-byte boundary, N % 4 == 0) of `cols` floats take tiles too:
// rows of an odd number of float4, N % 8 == 4, of 20-124 floats, from 5.9 tiles per SM. Such a
// row starts on an odd 16-byte slot every other row, so the float4 groups of path (a) straddle a
// 32-byte sector at each end of half the rows; a tile is one stretch of consecutive rows. Timed
// against the library's path (a) (docs/notes/step08.md, change 41; the tiles' time over the
// library's): 36-60 floats 0.986-1.058 at 3.0-3.6 tiles per SM and 0.934-0.982 from 4.7; 68-108
// floats 0.991-1.014 at 4.7 and 0.927-0.980 from 7.1; 116-124 floats 0.964-1.007 at 4.7 and
// 0.938-0.972 from 7.1; 20 and 28 floats 0.899-0.931 at 5.9 and 17.8. Rows of 12 floats were
// slower on tiles (1.025-1.076), and rows of N % 8 == 0 went both ways (0.969-1.028): they keep
// path (a).
inline bool use_aligned_tiles(int64_t rows, int cols, int sms) {
  if (cols % 8 != 4 || cols < 20 || cols > 124) return false;
  const int per_tile = tile_rows(cols, tile_group(cols));
  return 10 * ((rows + per_tile - 1) / per_tile) >= 59 * int64_t(sms);
}

// Path (a2), rows of two floats as one vector, two rows a float4 (change 43): where x lies on an
// 8-byte boundary (`ux` its address; y then does too, the launcher having checked that they
// share their 16-byte offset) and the 2M floats can be counted in an int. At any number of rows,
// ahead of the tiles' start and past it.
inline bool takes_pairs(uintptr_t ux, int64_t rows, int cols) {
  return cols == 2 && ux % 8 == 0 && rows <= std::numeric_limits<int>::max() / 2;
}

// The launcher's choice of path (a'): `aligned` is x on a 16-byte boundary and N % 4 == 0.
inline bool takes_tiles(bool aligned, int64_t rows, int cols, int sms) {
  return aligned ? use_aligned_tiles(rows, cols, sms) : use_tiles(rows, cols, sms);
}

}  // namespace fastsoftmax::detail
