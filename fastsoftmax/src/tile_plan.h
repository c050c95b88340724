// SPDX-License-Identifier: MIT
// fastsoftmax: how `tiles` groups rows into tiles and which matrices take it (host code; the
// kernel is in tile_rows.cuh, which says what a tile is), and which rows of two floats take
// `pairs` instead (single_rows.cuh). docs/library.md, "Short rows".
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

// Tiles an SM, in tenths, from which unaligned rows of `cols` floats take `tiles`. 2.5 for rows
// of 17-131 floats: with fewer, SMs sit with one block or none and `sub_warp`, one row a group,
// was faster (H100: 8192x127, 256 tiles, 0.880 of memcpy against 0.928; 16384x127, 512 tiles,
// 0.943 against 0.904). Rows of 2-16 floats (one lane a row, 256-2048 rows a tile) start where
// shape scans on an H100 first had the tiles level with the lessons' `sub_warp` or ahead, which
// depends on the length: 4.7 tiles an SM at 3 floats, 2.9 at 5, 6.8 at 6, 2.8 at 7, 4.1 at 9,
// 4.4 at 10 and 11. Rows of 2, 13, 14 and 15 floats were level or ahead already at 2.5. Rows of
// 4, 8, 12 and 16 floats are unaligned only off their 16-byte boundary and were not timed there:
// they keep 2.5.
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

// Whether unaligned rows of `cols` floats take `tiles`: up to 131 floats, from
// tile_start_tenths(cols) / 10 tiles an SM. On rows of 1-16 floats `sub_warp` gives a row a lane
// or a few, 4-28 bytes in flight each, and a block per 32-128 rows: 0.41-0.84 of memcpy at 4M-67M
// rows of 1, 2 and 7 floats, where one lane a row over tiles ran at 0.96-1.00. Rows of one float
// never come here (`single`), nor rows of two on an 8-byte boundary (`pairs`).
inline bool use_tiles(int64_t rows, int cols, int sms) {
  if (cols > 131) return false;
  const int per_tile = tile_rows(cols, tile_group(cols));
  return 10 * ((rows + per_tile - 1) / per_tile) >= tile_start_tenths(cols) * int64_t(sms);
}

// Whether aligned rows (x on a 16-byte boundary, N % 4 == 0) of `cols` floats take `tiles` too:
// those of an odd number of float4 (N % 8 == 4) of 20-124 floats, from 5.9 tiles an SM. Every
// other such row starts on an odd 16-byte slot, so `sub_warp`'s float4 groups straddle a 32-byte
// sector at both ends of half the rows, where a tile is one stretch of consecutive rows. The
// tiles' time over `sub_warp`'s: 0.93-0.98 from 4.7 tiles an SM at 36-60 floats and from 7.1 at
// 68-124, 0.96-1.06 on fewer; 0.90-0.93 at 20 and 28 floats from 5.9. Rows of 12 floats were
// slower on tiles (1.025-1.076) and rows of N % 8 == 0 went both ways (0.969-1.028): they keep
// `sub_warp`.
inline bool use_aligned_tiles(int64_t rows, int cols, int sms) {
  if (cols % 8 != 4 || cols < 20 || cols > 124) return false;
  const int per_tile = tile_rows(cols, tile_group(cols));
  return 10 * ((rows + per_tile - 1) / per_tile) >= 59 * int64_t(sms);
}

// `pairs`, rows of two floats read as one vector, two rows a float4: where x lies on an 8-byte
// boundary (`ux` its address; y then does too, the dispatch having checked that they share their
// 16-byte offset) and the 2M floats can be counted in an int. It was ahead of the tiles at every
// number of rows.
inline bool takes_pairs(uintptr_t ux, int64_t rows, int cols) {
  return cols == 2 && ux % 8 == 0 && rows <= std::numeric_limits<int>::max() / 2;
}

// The dispatch's choice of `tiles`: `aligned` is x on a 16-byte boundary and N % 4 == 0.
inline bool takes_tiles(bool aligned, int64_t rows, int cols, int sms) {
  return aligned ? use_aligned_tiles(rows, cols, sms) : use_tiles(rows, cols, sms);
}

}  // namespace fastsoftmax::detail
