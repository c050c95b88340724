// SPDX-License-Identifier: MIT
// fastsoftmax: a split sized for a given path and CTA count (make_split), and the launcher's
// choice (plan_split).
#include <algorithm>
#include <string>

#include "check.h"
#include "launch.cuh"
#include "split_internal.h"

namespace fastsoftmax::detail {

SplitPlan make_split(Split path, int parts, int rows, int cols, int threads) {
  const auto refuse = [&](const std::string& why) {
    throw_invalid("fastsoftmax: cannot split rows of " + std::to_string(cols) + " floats over " +
                  std::to_string(parts) + " CTAs: " + why);
  };
  if (path == Split::kNone) refuse("no split path given");
  if (parts < 2) refuse("a split needs at least 2 CTAs");
  const bool cluster = path == Split::kCluster || path == Split::kClusterHeld;
  const bool held = path == Split::kHeld || path == Split::kClusterHeld;
  if (cluster && parts > kMaxClusterCtas) refuse("a cluster holds at most 16");
  if (threads != kSplitThreads && !(threads == 1024 && held) &&
      !(threads == kSmallSplitThreads && path == Split::kCluster))
    refuse("CTAs of " + std::to_string(threads) +
           " threads (the sizes built: 512, 1024 for the held paths, 128 for clusters)");
  if (threads == kSmallSplitThreads && parts > kSmallMaxParts)
    refuse("clusters of CTAs of 128 threads hold at most " + std::to_string(kSmallMaxParts) +
           " (two warps' pairs a lane)");
  if (!clusters_usable()) refuse("thread block clusters are not in use on this device");
  SplitPlan plan;
  plan.path = path;
  plan.parts = parts;
  plan.threads = threads;
  const int64_t slots = cols / 4;
  plan.chunk = static_cast<int>((slots + parts - 1) / parts);
  const int per_thread = held ? 2 * threads : threads;
  const int packs = (plan.chunk + per_thread - 1) / per_thread;
  if (packs > 8)
    refuse(held ? "a part would need more than 16 float4 per thread"
                : "a part would need more than 8 float4 per thread");
  with_split_packs(std::max(packs, 1), [&](auto p) { plan.packs = decltype(p)::value; });
  const int64_t fit = groups_that_fit(plan);
  if (fit < 1) refuse("not even one group of them fits on the GPU at once");
  // Balanced: every cluster or group takes the same number of rows (or one fewer).
  const int64_t rounds = (rows + fit - 1) / fit;
  plan.groups = (rows + rounds - 1) / rounds;
  // (i)'s pairs always go as tagged words; (h)'s where a group takes at most four rows (and, since
  // change 42, wherever at most three groups fit; below). In the same rounds as the counter:
  // 8x1048576 (i) 0.82-0.83 of memcpy against 0.80, 4x1048576 (h, one
  // round) 0.76 against 0.71, 16x1048576 (four rounds) 0.84 against 0.82, 16x262147 0.93-0.95
  // against 0.88-0.90; at eight rounds and more level or behind: 32x1048576 0.83 both, 64x524288
  // 0.83-0.84 against 0.87, 256x524288 0.85 against 0.89 (docs/notes/step08.md, change 21).
  // Where at most three groups fit (rows of 67 CTAs' worth and more on an H100), (h)'s pairs go
  // as tagged words over any number of rows: 0.79-0.83 of memcpy against the counter's 0.73-0.77
  // at 10x1912074, 14x1700000 and 66x1912074 (two groups), 0.82 against 0.77 at 30x1300000 and
  // 0.79-0.80 against 0.76 at 64x1200001 (three), 0.74 against 0.70 at 100x1500000 (50 rows a
  // group); level at 100x1200000 and 128x2097152 (change 42). Where four groups fit they were
  // ahead at five and six rows a group and level at seven and eight (20x1000000 0.85-0.86 against
  // 0.84-0.85, 32x1048576 0.83 both); where seven or eight fit, behind from five (48x600000 0.82
  // against 0.84-0.85, 80x520000 0.83 against 0.87). Both keep four rows a group (the gain in four
  // groups is measured at two shapes only).
  plan.tagged = path == Split::kHeld ||
                (path == Split::kGrid && (rounds <= kTaggedRounds || fit <= kTaggedGroups));
  // Clusters over many rows (8 or more per resident cluster): two rows each, far more clusters
  // than fit at once, so that the hardware starts a new cluster wherever one ends. Clusters on
  // some SMs run faster than others; with a fixed share of the rows each, the slowest decides.
  // 0.983-0.988 of memcpy against 0.93-0.95 at every long-rows shape from 32768 to 131075
  // columns, 0.974 against 0.94 at 512x262147 (docs/notes/step08.md, change 8). A cluster has no
  // partner outside itself, so waiting for room is safe.
  if (path == Split::kCluster && rows >= kRowsPerClusterForWaves * fit)
    plan.groups = (rows + 1) / 2;
  // Clusters over 2-8 rounds whose last round would be at most half full: every cluster that fits,
  // the last round's few rows taken by some of them, instead of the balanced count, which leaves
  // up to half of them idle in every round (change 53). On an H200, fit against
  // balanced: 265x24869 17.3-17.5 us against 20.5-20.6 (clusters of 2, 132 against 89),
  // 400x24869 23.7 against 26.1, 240x38860 23.7 against 26.6-26.8 (of 3), 150x60715 21.5-21.7
  // against 22.9-23.0 (of 4), 50x90001 14.6-14.7 against 16.4-16.5 (of 6), 100x120001 26.9-27.1
  // against 29.3-29.4 (of 8), 48x262144 30.4 against 32.0-32.2 (of 16); 0-2% behind only one
  // row past one round of clusters of 8 and 16 (31x120001, 15x262144), shapes plan_rows gives
  // other paths. Past half full the balanced count was ahead by up to 7% at six shapes (100x60715,
  // 64x90001, 50x120001, 36x262144, 64x262144, 600x24869), else within 2.3% either way. Not yet
  // measured on an H100 (results/step08_change53_h200.txt).
  else if (path == Split::kCluster && threads == kSplitThreads && rows > fit &&
           2 * (rows - (rounds - 1) * fit) <= fit)
    plan.groups = fit;
  // (g) with held parts: a cluster per row. Its CTAs have no next row in flight; what keeps DRAM
  // busy while one cluster exchanges and stores is the other clusters, started as others end.
  if (path == Split::kClusterHeld) plan.groups = rows;
  // Small clusters, all resident: the rows start in stages of about kStageBytes of the matrix,
  // each stage kStageShare of its bytes' time at the GPU's peak DRAM bandwidth after the one
  // before. Loaded all at once, every row's last bytes land near the end of the whole matrix's,
  // and every row's exchange and stores come after that; in stages, the first rows are exchanged
  // and stored while the rest stream in. Change 24 started the clusters past one CTA an SM (at
  // most half) one part's time on every SM late: two stages. Stages of 1 MiB, 0.6 of their time
  // apart, measured 1.9% ahead of it on average over 20 shapes of 1-12.5 MiB, by up to 6%
  // (100x32768 0.94 of memcpy against 0.89, 96x16387, 64x32768), level at 16-24 rows of 16384 and
  // at 128x16384, 0.7% behind at 260x8192; stages 0.75 or 1.0 of their time apart, or of 0.75
  // or 1.5 MiB, did worse on average (docs/notes/step08.md, change 27).
  if (path == Split::kCluster && threads == kSmallSplitThreads && plan.groups <= fit) {
    const double row_bytes = double(cols) * sizeof(float);
    const int64_t stages =
        std::min<int64_t>(plan.groups, static_cast<int64_t>(rows * row_bytes / kStageBytes));
    if (stages >= 2) {
      plan.stage_groups = (plan.groups + stages - 1) / stages;
      plan.stagger_ns = static_cast<unsigned>(kStageShare * double(plan.stage_groups) * row_bytes /
                                              device_info().peak_bytes_per_ns);
    }
  }
  return plan;
}

SplitPlan plan_split(int rows, int cols) {
  const SplitPlan plan = plan_rows(rows, cols);
  // Change 50: 8-32 rows of 16K-64K slots (64K-256K floats), where (g) in CTAs of 512, (h) or (i)
  // would take fewer CTAs a row or more than one round: (i) over every resident CTA, two an SM,
  // in parts of more than 1024 slots (two float4 a thread and more). A cluster of (g) has one CTA
  // an SM and loads its part through the stage; in (i) half of each part goes straight into
  // registers, and an SM holds parts of two rows. Measured against the plan before, two processes
  // (results/step08_change50_h100.txt): 16x100000 9.5 us against 10.7, 16x128256 10.4-10.7
  // against 11.8, 20x100000 10.2 against 11.4, 20x256000 17.9-18.1 against 19.4, 24x128256 13.1
  // against 13.9, 32x151936 17.6-17.7 against 18.7-18.8, 8x151936 8.9-9.0 against 10.0-10.1,
  // 10x151936 9.4-9.5 against 10.4; level at 12x100000 and 24x151936; behind where the parts
  // come to 1024 slots or fewer (8x100000, 8x128256: 2-5%; 10x100000 1.5-2%), and against (h)
  // of as many CTAs (16x151936, 10x256000: 1-2%), which keep their plans. Past 32 rows both ways
  // (36x128256 10% ahead, 56x128256 12% behind).
  if (rows <= kWideClusterRows || rows > kEveryCtaRows || plan.threads != kSplitThreads ||
      (plan.path != Split::kCluster && plan.path != Split::kGrid && plan.path != Split::kHeld))
    return plan;
  const int64_t slots = cols / 4;
  const int64_t every = std::min<int64_t>(kTaggedBatchParts, 2 * device_info().sms / rows);
  const int64_t part = (slots + every - 1) / every;
  if (slots > int64_t(kMaxClusterCtas) * kSlotsPerCta || part <= 1024 || part > 2 * kSlotsPerCta)
    return plan;
  if (every <= plan.parts && plan.groups >= rows) return plan;
  return make_split(Split::kHeld, static_cast<int>(every), rows, cols);
}

}  // namespace fastsoftmax::detail
