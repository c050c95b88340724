// SPDX-License-Identifier: MIT
// fastsoftmax: which rows are split over several CTAs, and over how many (plan_rows).
#include <algorithm>

#include "launch.cuh"
#include "split_internal.h"

namespace fastsoftmax::detail {

// The choices, each measured on the H100 (docs/notes/step08.md, experiments 1 and 2, changes 3
// to 5):
//  - rows of up to 16K floats stay on step07's paths: split over 2-4 CTAs of 512, 32x16384 and
//    128x4096 ran at 0.45-0.73 of memcpy against path (c)'s 0.70-0.72 and 0.88-0.89; except, on
//    a matrix of rows of 8K-32K floats that fit in one round, clusters of CTAs of 128 threads
//    (changes 18 and 24);
//  - longer rows: a cluster of K = 2..16 CTAs (8 float4 a thread) when there are rows for at
//    least one round of clusters: 2048x65536 0.95, 512x262144 (K = 16) 0.95 against a grid
//    group's 0.91, 64x262144 0.91 against 0.86 (synccheck reports "Missing wait" on clusters of 12
//    and 16, and on tools/mbarrier_probe.cu's minimal kernel in clusters of 16 too). That includes the rows
//    step07's path (d) holds in one SM's shared memory: clusters of 2 were ahead of (d) by
//    0.003-0.012 of memcpy at 4096x32768, 4096x32771 and 4000x20003, and tied at 4096x24579;
//  - few rows of at most 8 CTAs' worth: clusters of K = 2..8, as wide as spreads the rows over
//    the resident CTAs (16x65536: clusters of 8 0.67 against a grid group of 8's 0.62; 33x20001:
//    clusters of 3 1.07-1.12 against 0.83-0.92; 128x20000: clusters of 2 0.75-0.76 against
//    0.70-0.72), but no wider than takes every row in one round of clusters (change 17); 16 on
//    at most seven rows (change 47);
//  - rows just past one round of clusters of the fewest CTAs that hold a row, where a grid group
//    of as many CTAs takes them in one round: path (h); where none does, rows of 2 CTAs' worth
//    that clusters of 2 would take in two rounds, where two blocks of step07's path (d) fit an SM
//    (up to 7208 slots on an H100): (d) (changes 17, 46 and 48); rows of 5-16 CTAs' worth that
//    clusters would take in three rounds or more, where (i) in the fewest CTAs that hold a row
//    takes every row in one: (i) (change 45);
//  - the rest, path (h): K as large as spreads the rows over every resident CTA, but at least 4
//    float4 a thread (1x1048576: K = 128 at 0.52 of memcpy, 264 CTAs of 2 float4 at 0.32;
//    8x262144: K = 32 0.65-0.66 against clusters of 16's 0.57); on few rows of a small matrix
//    one CTA an SM in parts of 1-2 float4 a thread (change 47); at most 128 CTAs a row, else
//    (i) where that needs at most 128 (change 49);
//  - but many rows of up to 4 MiB where (h) would exchange behind its counter: (g) with held
//    parts, a cluster per row (change 44, below);
//  - except where (h) would take two or more rounds of rows and (i) one: (i) in groups of the
//    fewest CTAs that hold a row (8x1048576: K = 32 or 33 0.74-0.76 against (h)'s groups of 64 in
//    two rounds 0.72-0.73; 12x700001: 0.88 against 0.85), or of as many as are resident where
//    that is a tenth more or better (change 12: 6x1048576 K = 44 0.73 against K = 32's 0.69,
//    5x1048576 K = 52 0.70 against 0.64, 6x1000003 0.87 against 0.80; K = 33 at 8x1048576 and
//    66 at 4x2097152 were 0.005-0.008 behind 32 and 64);
//  - and rows longer than (h) holds at all: (i) in the fewest CTAs of 1024 threads that hold a row
//    (1x4400003: K = 68 0.71; in CTAs of 512, K = 135 0.62 and K = 264 0.55-0.59; step07's path
//    (e) took 0.02).
// plan_split's choice before change 50 (below).
SplitPlan plan_rows(int rows, int cols) {
  if (!clusters_usable()) return {};
  const int64_t slots = cols / 4;
  // Rows of 2048-8192 slots (8K-32K floats) that fit in one round: clusters of CTAs of 128
  // threads, one row each, every warp's pair exchanged (change 24). First taken on small matrices
  // of few rows at most two CTAs an SM (change 18: 32x16384 0.80 of memcpy against path c's
  // 0.70, 1x16384 0.77 against 0.64, 8x32768 0.75 against 0.65 in clusters of 512). With the
  // warps' pairs exchanged and the late clusters staggered, they were ahead of step07 at every
  // shape measured where every row fits in one round, up to 8 CTAs an SM: 64x16384 0.86-0.89 against 0.77-0.81,
  // 128x16384 0.92-0.93 against 0.82 (clusters of 7), 260x8192 0.93-0.94 against 0.91 (of 3),
  // 170x12000 1.29-1.32 against 1.14-1.15, 64x32768 0.88-0.90 against 0.67-0.70, 16x8192
  // 0.82-0.83 against 0.75-0.76. Below 2048 slots they went both ways (64x5000 1.30-1.35 against
  // 1.34-1.40, 77x7001 1.35 against 1.37, 176x6000 1.28-1.34 against 1.22-1.30): not taken
  // (docs/notes/step08.md, change 24; results/step08_change24_h100.txt).
  //   Rows of 8193-16384 slots (32K-64K floats) take clusters of 9-16 such CTAs where every row
  // fits in one round (change 28), where they had clusters of 3-8 CTAs of 512 threads or grid
  // groups. Ratios to memcpy, three rounds against the plans before it on one H100: 95x36005
  // 1.12-1.16 against 0.80-0.81 (step07's path d 0.86-0.88), 32x65536 0.88-0.90 against 0.70,
  // 16x65536 0.82-0.83 against 0.66, 64x49152 0.92-0.93 against 0.72-0.73, 48x40000 0.91 against
  // 0.71-0.72, 1x65536 0.76-0.79 against 0.62-0.64; ahead at all 14 shapes whose plan it changes
  // (results/step08_change28_h100.txt). At 32x16384 clusters of 16 were no faster than 8
  // (results/step08_32x16384_k_h100.txt), so rows of up to 8192 slots keep at most 8.
  if (slots >= 2048 && slots <= int64_t(kSmallMaxParts) * 1024) {
    // The widest clusters, from at most 4 float4 a thread down to 8, that take every row in one
    // round at no more than kSmallCtasPerSm CTAs an SM: of at most 8 CTAs up to 8192 slots (the
    // rule measured there), of 9-16 past that.
    const int64_t widest = slots <= int64_t(kSmallNarrowParts) * 1024 ? kSmallNarrowParts
                                                                      : kSmallMaxParts;
    for (int64_t k = std::min<int64_t>(widest, (slots + 511) / 512); k >= (slots + 1023) / 1024;
         --k) {
      if (rows * k > kSmallCtasPerSm * device_info().sms) continue;
      const SplitPlan small =
          make_split(Split::kCluster, static_cast<int>(k), rows, cols, kSmallSplitThreads);
      if (small.groups >= rows) return small;
    }
  }
  if (slots <= 4096) return {};
  const int64_t sms = device_info().sms;
  const int64_t ctas = sms * 2;  // 512-thread CTAs resident at once
  const int64_t need = std::max<int64_t>(2, (slots + kSlotsPerCta - 1) / kSlotsPerCta);
  // As many CTAs a row as spread the rows over the resident CTAs, in parts of at least 2048 slots;
  // or, where that is wider and the parts come to at most 1024 slots (two float4 a thread), one
  // CTA an SM in parts of at least 512, at most as many as read their pairs in one round trip
  // (change 47, runs 3-5: 1x151936 6.7-6.9 us in 75 parts of (h) against 7.3-7.4 in 19,
  // 1x256000 6.9-7.1 in 125 against 7.5-7.7 in 32, 2x262144 7.5-7.6 in 66 against 7.9-8.0 in 32, 1x300001 7.1-7.3
  // in 128 against 7.7 in 37; 1x1048576 in 132 parts, two round trips, 9.5-9.8 us against 8.9-9.1
  // in 128, 1x300001 and 1x524288 in 132 0-4% behind 37 and 64; 3x200000 and 4x151936 in parts
  // of 1137 and 1151 within 2% of 25 and 19; results/step08_change47_h100.txt).
  const int64_t spread = std::min({sms / rows, (slots + 511) / 512, int64_t(kTaggedBatchParts)});
  const bool spread_fits = spread > 0 && (slots + spread - 1) / spread <= 1024;
  // Either way at most 128 (change 49: 1x1100000 9.1 us in 128 parts against 10.1-10.2 in 135,
  // 1x1500000 10.0 against 10.9-11.0 in 184, 1x2000000 11.2-11.3 against 11.7-11.8 in 245,
  // 2x1500000 13.4-13.6 against 13.9-14.1 in 132; results/step08_change49_h100.txt).
  const int64_t wide = std::min<int64_t>(
      kTaggedBatchParts,
      std::max(std::min(ctas / rows, (slots + 2047) / 2048), spread_fits ? spread : 0));
  // (i) holds twice (h)'s part per CTA, half of it in the stage, without the next row in flight;
  // in CTAs of 1024 threads, twice that again.
  const int64_t need_held = (slots + 2 * kSlotsPerCta - 1) / (2 * kSlotsPerCta);
  const int64_t need_wide = (slots + 4 * kSlotsPerCta - 1) / (4 * kSlotsPerCta);
  if (need <= kMaxClusterCtas) {
    const SplitPlan c = make_split(Split::kCluster, static_cast<int>(need), rows, cols);
    const int64_t fit = groups_that_fit(c);
    if (rows > fit) {
      // Clusters take two rounds or more. Where a grid group of the same K takes every row in one
      // round, it wins: clusters fit fewer CTAs than the SMs hold (one GPC each), so these bands
      // exist just past each cluster size's fit (63x50001: grid 0.89-0.90 of memcpy against
      // clusters of 4 in two rounds 0.79-0.82; 16x262147 0.88-0.90 against 0.74-0.75). With two
      // rounds either way, clusters stay ahead (24x262144: 0.78 against 0.66-0.67). Change 17 in
      // docs/notes/step08.md.
      const SplitPlan h = make_split(Split::kGrid, static_cast<int>(need), rows, cols);
      if (h.groups >= rows) return h;
      // Clusters of 2 in two rounds, which balanced take two rows each, against step07's path
      // (d), a block per row and the SMs as they come free: (d) 0.87-1.03 of memcpy against
      // 0.77-0.98 at 133x20001, 140x20001, 220x16500 and 264x20001, level at 180x28001; at
      // 300x20001, three rounds of clusters, (d) was behind (0.84 against 0.89). Clusters of 3
      // and 4 went both ways against (d) (0.03-0.06 behind at 95-120x36005, 0.14 ahead at
      // 100x50001; change 17). Clusters of 3 in two rounds, where (d) takes every row in one
      // wave (at most a row an SM), were behind it on matrices of up to about 18 MiB (step07's
      // time over theirs 0.94-0.97 at 89x48000, 110x38000, 117x36005 and 130x32800; 100x40000
      // 0.97-1.00, 125x33000 0.91-0.92), level at 105x44444, (d) 1-2% ahead of them at
      // 132x36005 (19 MB), and behind past that (120x45001 and 128x49152, 4%): (d) up to 18 MiB
      // (change 29; three rounds each, results/step08_tworound_h100.txt,
      // step08_change29_first_h100.txt). Clusters of 4 keep their rounds past the rows that (i)
      // in 3 takes in one (100x65536: 1.17; change 30 below).
      // Rows too long for two blocks of (d) an SM keep the clusters of 2 (changes 46 and 48; on an
      // H100 past 7208 slots, 28832 floats): 256x32000 0.89-0.90 of memcpy against (d)'s
      // 0.75, 256x30001 1.05-1.07 against 0.89, 256x29200 0.90 against 0.76-0.77, 220x29000
      // 0.96-0.99 against 0.88; (d), two blocks an SM, ahead or level below (240x24000 0.86-0.87
      // against 0.84, 160x28000 0.74 against 0.71, 256x28800 level;
      // results/step08_change46_h100.txt, step08_change48_h100.txt).
      if (need == 2 && rows <= 2 * fit && slots <= device_info().pair_slots) return {};
      // Rows just past one CTA's 4096 slots, up to 4750 (19003 floats), keep (d) over twice as
      // many rows, up to two waves of its blocks (change 51: 300-436 rows of 16388-19000 floats,
      // step07's time over the clusters' 0.875-0.94; at 600 rows 0.94-1.03, at 800 1.00-1.05, at
      // 2000 1.06-1.12; clusters of 3 and 4 slower than those of 2 up to 600 rows;
      // results/step08_change51_h100.txt).
      if (need == 2 && rows <= 4 * fit && slots <= kShortPairSlots) return {};
      if (need == 3 && rows <= sms && slots <= device_info().cache_slots &&
          rows * slots * 16 <= kRowsInOneWaveBytes)
        return {};
      // Rows of 4 CTAs' worth past one round of clusters of 4 and of grid groups of 4 (67-88
      // rows on an H100): path (i) in 3 CTAs a row takes every row in one round. Three rounds
      // each on an H100 (results/step08_held3_band_h100.txt, change 30): 1.03-1.06 of step07's
      // speed at 67x65536, 70x60000 and 72x63000 where the clusters were 0.93-0.96, 5-10% ahead
      // of them at 75x57000 and 80x65536, level at 85x50001 and 88x52000.
      if (need == 4 && rows * 3 <= ctas) return make_split(Split::kHeld, 3, rows, cols);
      // Rows of 5-16 CTAs' worth that clusters would take in three rounds or more, where (i) in
      // the fewest CTAs that hold a row takes every row in one (change 45): 33x262144 0.85-0.86
      // of memcpy against clusters of 16 over three rounds 0.74, 32x200000 0.76-0.77 against
      // 0.69, 48x151936 0.80 against 0.73, 40x180001 0.93 against 0.88, 64x128256 0.84 against
      // 0.82. Over two rounds the clusters stay (50x128256: 0.98 against (i)'s 0.90; 24x256000
      // level).
      if (need >= 5 && rows > 2 * fit && rows * need_held <= ctas)
        return make_split(Split::kHeld, static_cast<int>(need_held), rows, cols);
      // Many rows of 10-16 CTAs' worth: (g) with held parts, a cluster per row, in half as many
      // CTAs (change 52). Fewer of the SMs' 264 CTAs of 512 are busy in wide clusters (on an H100
      // or H200, 14 clusters of 16 fit at once, 224 CTAs; 16 of 12, 192; 30 of 8, 240): a reading
      // of the fit, not measured as the cause. On an H200, time of (g) over the held parts' at
      // 384-2048 rows: 1.02-1.03 at 160000 floats (10 CTAs), 1.08-1.09 at 180000-180003 (11),
      // 1.04-1.08 at 190000-220000 (12-14), 1.00-1.04 at 230000-250000 (15-16), 1.02-1.04 at
      // 262144 and 262147 (16); below 384 rows both ways (0.93 at 96x230000, 1.06-1.09 at
      // 64x180000); clusters of 9 ahead of the held parts below 768 rows (0.94-1.00). On an H100,
      // change 44 measured 512x262144 at 0.980 of memcpy this way against 0.973-0.975
      // (results/step08_change52_h200.txt, step08_change44_h100.txt).
      if (need >= kHeldClusterMinParts && rows >= kHeldClusterRows)
        return make_split(Split::kClusterHeld, static_cast<int>(need_held), rows, cols);
      return c;
    }
    if (rows == fit) return c;
    if (need <= 8) {
      // Few rows: clusters as wide as spreads the rows over the resident CTAs, but never so wide
      // that fewer clusters fit than there are rows (40x60001: clusters of 6 in two rounds
      // 0.75-0.76 of memcpy, of 5 in one 0.90-0.92; change 17). Up to 8 CTAs; 16 on at most
      // kWideClusterRows rows (change 47: 1x128256 6.4-6.6 us in clusters of 16 against 7.2-7.3
      // in 8, 4x80000 6.4 against 6.9-7.0, 7x80000 6.8-7.1 against 7.3-7.5; at 8 rows of 100000
      // and 128256 floats clusters of 13 and 16 were 6-11% behind those of 8; on an H100 7
      // clusters of 16 fit one CTA an SM).
      const int64_t widest = rows <= kWideClusterRows ? int64_t(kMaxClusterCtas)
                                                      : std::min<int64_t>(8, std::max(need, wide));
      for (int64_t k = widest; k > need; --k) {
        const SplitPlan wider = make_split(Split::kCluster, static_cast<int>(k), rows, cols);
        if (wider.groups >= rows) return wider;
      }
      return c;
    }
  }
  if (need <= ctas) {
    const SplitPlan h =
        make_split(Split::kGrid, static_cast<int>(std::max(need, wide)), rows, cols);
    const bool one_round = rows <= groups_that_fit(h);
    // Many rows, where (h) would exchange behind its counter (more than four rows a group, more
    // than three groups) and (i) would take two rounds or more: (g) with held parts, a cluster
    // per row (change 44). Rows of up to 2 MiB in the fewest CTAs of 512 that hold one: 0.96-0.98
    // of memcpy against (h)'s 0.85-0.89 at 256x524288, 256x524291, 512x524288, 600x300000,
    // 300x400001 and 1000x270000, 0.90 against 0.87 at 64x524288 and 80x520000, level at
    // 40x524288 and 44x400001 (where (h) takes five rows a group). Rows of 2-4 MiB in clusters of
    // 16 CTAs of 1024, one an SM (the fewest, 9-15, fit fewer clusters: 200x700001 0.86 in 11,
    // 0.90 in 16), where at most six groups of (h) fit and on at least 96 rows: 0.86-0.91 against
    // 0.82-0.86 from 96 to 256 rows of 700001-1048579 floats (0.89 against 0.85 at 128x1048576);
    // behind (h) by 2-4% on 48-64 rows, and at 128-256 rows of 600000 floats, where seven groups
    // of (h) fit (results/step08_change44_h100.txt).
    if (!one_round && !h.tagged && rows * need_held > ctas) {
      if (need_held <= kMaxClusterCtas)
        return make_split(Split::kClusterHeld, static_cast<int>(need_held), rows, cols);
      if (need_wide <= kMaxClusterCtas && rows >= kHeldWideRows &&
          groups_that_fit(h) <= kHeldWideGroups)
        return make_split(Split::kClusterHeld, kMaxClusterCtas, rows, cols, 1024);
    }
    // (h) in one round, or more rounds than (i) would take in one. But where (h) needs more than
    // 128 CTAs a row (two round trips of the tagged exchange) and (i) at most 128, (i) (change 49:
    // 1x3000000 13.7-13.8 us in 128 parts of (i) against 14.7 in 184 of (h) and 14.5 in 264,
    // 1x2200000 12.3-12.4 against 13.3-13.4 in 135 of (h)).
    const bool one_trip = h.parts <= kTaggedBatchParts || need_held > kTaggedBatchParts;
    if ((one_round && one_trip) || rows * need_held > ctas) return h;
    // As many CTAs a row as are resident, up to 128, where that is at least a tenth more than the
    // fewest (change 49: 2x2200000 17.6-17.7 us in 128 against 18.1-18.2 in 132).
    const int64_t wide_held = std::min<int64_t>(kTaggedBatchParts, ctas / rows);
    const int64_t parts = wide_held * 10 >= need_held * 11 ? wide_held : need_held;
    return make_split(Split::kHeld, static_cast<int>(parts), rows, cols);
  }
  // A row longer than (h) holds on the whole GPU: in CTAs of 512, (i) would put two parts of the
  // row on some SMs. CTAs of 1024 threads, one an SM, each holding twice as much: 1x4400003 in 68
  // of them at 0.71 of memcpy against 135 of 512 at 0.62 (132 of 1024: 0.65), 3x5000001 0.65
  // against 0.59 (docs/notes/step08.md, change 9).
  if (need_wide > sms)
    return {};  // longer than the whole GPU holds, the stage included: read twice (path e)
  return make_split(Split::kHeld, static_cast<int>(need_wide), rows, cols, 1024);
}

}  // namespace fastsoftmax::detail
