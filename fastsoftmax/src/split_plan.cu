// SPDX-License-Identifier: MIT
// fastsoftmax: which rows are split over several CTAs, and over how many (plan_rows); plan_split
// (split_make.cu) adds the rule for 8-32 rows. docs/library.md, "Long rows: clusters" and "Few
// rows and very long rows: the grid"; the runs behind each rule are in the lab notebook
// (docs/notes/tuning.md, step08).
#include <algorithm>

#include "launch.cuh"
#include "split_internal.h"

namespace fastsoftmax::detail {

// The rules in the order plan_rows applies them, measured on the H100 unless marked:
//  - rows of up to 16K floats stay unsplit (over 2-4 CTAs of 512, 32x16384 and 128x4096 ran at
//    0.45-0.73 of memcpy against `block`'s 0.70-0.72 and 0.88-0.89), except rows of 8K-64K floats
//    that one round of the small clusters (CTAs of 128 threads) holds;
//  - longer rows of up to 16 CTAs' worth on a round of clusters or more: `cluster` in the fewest
//    CTAs of 512 that hold a row (2048x65536 0.95; 64x262144 0.91 against `grid`'s 0.86),
//    `smem_block`'s rows included (clusters of 2 ahead by 0.003-0.012 at 4096x32768). synccheck
//    reports "Missing wait" on clusters of 9, 12 and 16 (docs/library.md, "Open questions");
//  - past one round of clusters, the bands where `grid`, `smem_block`, `grid_held` or
//    `cluster_held` measured faster (below);
//  - fewer rows than a round, of at most 8 CTAs' worth: clusters as wide as spread the rows over
//    the GPU, up to 8 (16 on at most seven rows), never so wide that one round no longer holds
//    them;
//  - the rest: `grid`, K spreading the rows over every resident CTA in parts of at least 2048
//    slots, up to 128 (1x1048576: 128 CTAs 0.52, 264 of 2 float4 0.32); `cluster_held` on many
//    rows where `grid` would exchange behind its counter; `grid_held` where it takes every row in
//    one round and `grid` would not;
//  - rows longer than `grid` holds on the whole GPU: `grid_held` in CTAs of 1024.
SplitPlan plan_rows(int rows, int cols) {
  if (!clusters_usable()) return {};
  const int64_t slots = cols / 4;
  // The small clusters: rows of 2048-16384 slots (8K-64K floats) where every row fits in one
  // round at no more than kSmallCtasPerSm CTAs an SM, in clusters of CTAs of 128 threads that
  // exchange every warp's pair. On a small matrix a launch is a chain of latencies, which these
  // shorten: 64x16384 0.86-0.89 of memcpy against 0.77-0.81, 64x32768 0.88-0.90 against
  // 0.67-0.70, 95x36005 1.12-1.16 against 0.80-0.81 (its memcpy is slow), 1x65536 0.76-0.79
  // against 0.62-0.64. Below 2048 slots they went both ways: not taken. At 32x16384 clusters of
  // 16 were no faster than of 8, so rows of up to 8192 slots keep at most 8.
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
  // CTA an SM in parts of at least 512, at most as many as read their pairs in one batch
  // (1x256000: 6.9-7.1 us in 125 parts against 7.5-7.7 in 32; 1x1048576 in 132 parts, two
  // batches, 9.5-9.8 us against 8.9-9.1 in 128).
  const int64_t spread = std::min({sms / rows, (slots + 511) / 512, int64_t(kTaggedBatchParts)});
  const bool spread_fits = spread > 0 && (slots + spread - 1) / spread <= 1024;
  // Either way at most 128 (1x1100000: 9.1 us in 128 parts against 10.1-10.2 in 135; 1x2000000
  // 11.2-11.3 against 11.7-11.8 in 245).
  const int64_t wide = std::min<int64_t>(
      kTaggedBatchParts,
      std::max(std::min(ctas / rows, (slots + 2047) / 2048), spread_fits ? spread : 0));
  // `grid_held` holds twice `grid`'s part per CTA, half of it in the stage, with no next row in
  // flight; in CTAs of 1024 threads, twice that again.
  const int64_t need_held = (slots + 2 * kSlotsPerCta - 1) / (2 * kSlotsPerCta);
  const int64_t need_wide = (slots + 4 * kSlotsPerCta - 1) / (4 * kSlotsPerCta);
  if (need <= kMaxClusterCtas) {
    const SplitPlan c = make_split(Split::kCluster, static_cast<int>(need), rows, cols);
    const int64_t fit = groups_that_fit(c);
    if (rows > fit) {
      // Clusters take two rounds or more. Where grid groups of the same K take every row in one
      // round, `grid` wins: clusters fit fewer CTAs than the SMs hold (a cluster sits in one GPC),
      // so such bands lie just past each cluster size's fit (16x262147: 0.88-0.90 of memcpy
      // against 0.74-0.75 in clusters over two rounds). With two rounds either way the clusters
      // stay ahead (24x262144: 0.78 against 0.66-0.67).
      const SplitPlan h = make_split(Split::kGrid, static_cast<int>(need), rows, cols);
      if (h.groups >= rows) return h;
      // Rows of 2 CTAs' worth over two rounds of clusters of 2: `smem_block`, a block a row on
      // the SMs as they come free, while two of its blocks fit an SM (up to 7208 slots on an
      // H100): 0.87-1.03 of memcpy against 0.77-0.98 at 133-264 rows of 16500-20001 floats; over
      // three rounds of clusters it was behind. Past 7208 slots the clusters of 2 took 11-16%
      // less time (256x30001: 1.05-1.07 against 0.89).
      if (need == 2 && rows <= 2 * fit && slots <= device_info().pair_slots) return {};
      // Rows just past one CTA's 4096 slots, up to 4750 (19003 floats): `smem_block` on up to
      // twice as many rows, two waves of its blocks (its time over the clusters' 0.875-0.94 at
      // 300-436 rows of 16388-19000 floats, 1.00-1.05 at 800, 1.06-1.12 at 2000).
      if (need == 2 && rows <= 4 * fit && slots <= kShortPairSlots) return {};
      // Rows of 3 CTAs' worth over two rounds of clusters of 3, at most a row an SM: `smem_block`
      // takes every row in one wave. It took 0.91-1.00 of the clusters' time up to about 18 MiB
      // (130x32800: 0.94-0.97 of memcpy against 0.89), 4% more past it (120x45001, 128x49152).
      if (need == 3 && rows <= sms && slots <= device_info().cache_slots &&
          rows * slots * 16 <= kRowsInOneWaveBytes)
        return {};
      // Rows of 4 CTAs' worth past one round of clusters of 4 and of grid groups of 4 (67-88
      // rows on an H100): `grid_held` in 3 CTAs a row takes every row in one round, 5-14% ahead
      // of the clusters at 67-80 rows (70x60000: 0.904 of memcpy against 0.806), level at 85-88.
      if (need == 4 && rows * 3 <= ctas) return make_split(Split::kHeld, 3, rows, cols);
      // Rows of 5-16 CTAs' worth that clusters would take in three rounds or more, where
      // `grid_held` in the fewest CTAs that hold a row takes every row in one: 33x262144 0.85-0.86
      // of memcpy against 0.74, 48x151936 0.80 against 0.73. Over two rounds the clusters stay
      // (50x128256: 0.98 against 0.90).
      if (need >= 5 && rows > 2 * fit && rows * need_held <= ctas)
        return make_split(Split::kHeld, static_cast<int>(need_held), rows, cols);
      // Many rows of 10-16 CTAs' worth: `cluster_held`, a cluster a row in half as many CTAs. On
      // the H200, `cluster` took 1.02-1.09 times its time at 384-2048 rows of 160000-262147
      // floats, and went both ways below 384 rows. Wide clusters leave more SMs idle (14 clusters
      // of 16 fit, 224 of 264 CTAs; 30 of 8, 240): a reading of the fit, not the measured cause. On
      // an H100 only 512x262144 was timed (0.980 of memcpy against 0.973-0.975).
      if (need >= kHeldClusterMinParts && rows >= kHeldClusterRows)
        return make_split(Split::kClusterHeld, static_cast<int>(need_held), rows, cols);
      return c;
    }
    if (rows == fit) return c;
    if (need <= 8) {
      // Few rows: clusters as wide as spread the rows over the resident CTAs, never so wide that
      // fewer clusters fit than there are rows (40x60001: clusters of 6 over two rounds 0.75-0.76
      // of memcpy, of 5 in one 0.90-0.92). Up to 8 CTAs; 16 on at most kWideClusterRows rows
      // (1x128256: 6.4-6.6 us in clusters of 16 against 7.2-7.3 in 8; at 8 rows 6-11% behind).
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
    // Many rows, where `grid` would exchange behind its counter (more than four rows a group,
    // more than three groups) and `grid_held` would take two rounds or more: `cluster_held`, a
    // cluster a row. Rows of up to 2 MiB in the fewest CTAs of 512 that hold one: 0.96-0.98 of
    // memcpy against `grid`'s 0.85-0.89 at 256x524288 and five more shapes, level at 40-44 rows.
    // Rows of 2-4 MiB in clusters of 16 CTAs of 1024, one an SM (the fewest, 9-15, fit fewer
    // clusters), on at least 96 rows and where at most six groups of `grid` fit: 0.86-0.91
    // against 0.82-0.86; 2-4% behind on 48-64 rows, or where seven groups fit.
    if (!one_round && !h.tagged && rows * need_held > ctas) {
      if (need_held <= kMaxClusterCtas)
        return make_split(Split::kClusterHeld, static_cast<int>(need_held), rows, cols);
      if (need_wide <= kMaxClusterCtas && rows >= kHeldWideRows &&
          groups_that_fit(h) <= kHeldWideGroups)
        return make_split(Split::kClusterHeld, kMaxClusterCtas, rows, cols, 1024);
    }
    // `grid` where it takes every row in one round, or where `grid_held` could not either. But
    // where `grid` needs more than 128 CTAs a row (two batches of tagged pairs) and `grid_held` at
    // most 128: `grid_held` (1x3000000: 13.7-13.8 us in 128 parts against 14.7 in 184 of `grid`).
    const bool one_trip = h.parts <= kTaggedBatchParts || need_held > kTaggedBatchParts;
    if ((one_round && one_trip) || rows * need_held > ctas) return h;
    // As many CTAs a row as are resident, up to 128, where that is at least a tenth more than the
    // fewest (6x1048576: 44 CTAs 0.730-0.733 of memcpy against 32's 0.692-0.696; 2x2200000:
    // 17.6-17.7 us in 128 against 18.1-18.2 in 132).
    const int64_t wide_held = std::min<int64_t>(kTaggedBatchParts, ctas / rows);
    const int64_t parts = wide_held * 10 >= need_held * 11 ? wide_held : need_held;
    return make_split(Split::kHeld, static_cast<int>(parts), rows, cols);
  }
  // A row longer than `grid` holds on the whole GPU: in CTAs of 512, `grid_held` would put two
  // parts of the row on some SMs. CTAs of 1024 threads, one an SM, each holding twice as much:
  // 1x4400003 in 68 of them 0.71 of memcpy against 135 of 512 at 0.62 (`two_pass`: 0.02).
  if (need_wide > sms)
    return {};  // longer than the whole GPU holds, the stage included: read twice (two_pass)
  return make_split(Split::kHeld, static_cast<int>(need_wide), rows, cols, 1024);
}

}  // namespace fastsoftmax::detail
