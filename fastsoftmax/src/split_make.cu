// SPDX-License-Identifier: MIT
// fastsoftmax: a split sized for a given path and CTA count (make_split: the count of clusters or
// groups, the exchange, the stages), and the dispatcher's choice (plan_split: plan_rows, then the
// rule for 8-32 rows). docs/library.md, "Long rows: clusters" and "Few rows and very long rows:
// the grid"; the runs are in the lab notebook (docs/notes/tuning.md, step08).
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
  // `grid_held`'s pairs always go as tagged words; `grid`'s where a group takes at most four rows
  // or at most three groups fit. Tagged words cost one or two trips to L2 where the counter costs
  // four or five; few rows gain (4x1048576, one round: 0.76 of memcpy against 0.71; 16x1048576,
  // four rounds: 0.84 against 0.82), many lose (256x524288: 0.85 against 0.89). Where at most
  // three groups fit (rows of 67 CTAs' worth and more on an H100) they gained over any number of
  // rows (10x1912074, 66x1912074: 0.79-0.83 against 0.73-0.77). Where four fit they gained at
  // five and six rows a group at two shapes only, and where seven or eight fit they lost from
  // five (80x520000: 0.83 against 0.87), so both keep four rows a group.
  plan.tagged = path == Split::kHeld ||
                (path == Split::kGrid && (rounds <= kTaggedRounds || fit <= kTaggedGroups));
  // Clusters over many rows (8 or more per resident cluster): a cluster per two rows, far more
  // than fit at once, so that the hardware starts a cluster wherever one ends. With a fixed share
  // each, the slowest cluster decides: 0.983-0.988 of memcpy against 0.93-0.95 on long rows of
  // 32768-131075 floats (H100). A cluster waits for no one outside itself, so queueing is safe.
  if (path == Split::kCluster && rows >= kRowsPerClusterForWaves * fit)
    plan.groups = (rows + 1) / 2;
  // Clusters over 2-8 rounds whose last round would be at most half full: every cluster that fits,
  // not the balanced count, which leaves up to half of them idle every round. On the H200:
  // 265x24869 17.3-17.5 us against 20.5-20.6 (132 clusters of 2 against 89), 48x262144 30.4
  // against 32.0-32.2 (of 16), ahead at 23 of 26 such shapes; past half full the balanced count
  // led by up to 7%. Not yet timed on an H100.
  else if (path == Split::kCluster && threads == kSplitThreads && rows > fit &&
           2 * (rows - (rounds - 1) * fit) <= fit)
    plan.groups = fit;
  // `cluster_held`: a cluster per row. Its CTAs have no next row in flight; what keeps DRAM busy
  // while one cluster exchanges and stores is the other clusters, started as others end.
  if (path == Split::kClusterHeld) plan.groups = rows;
  // Small clusters, all resident: the rows start in stages of about kStageBytes of the matrix,
  // each kStageShare of its bytes' time at the GPU's peak DRAM bandwidth after the one before.
  // Loaded all at once, every row's last bytes land with the whole matrix's and every exchange
  // and store waits for them; in stages the first rows are exchanged and stored while the rest
  // stream in. Against two stages: 1.9% ahead on average over 20 shapes of 1-12.5 MiB, up to 6%
  // (100x32768: 0.94 of memcpy against 0.89); other spacings and sizes did worse (H100).
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
  // 8-32 rows of 16K-64K slots (64K-256K floats) that `cluster` in CTAs of 512, `grid` or
  // `grid_held` would take in fewer CTAs a row or over more than one round: `grid_held` over
  // every resident CTA, two an SM, in parts of more than 1024 slots. A cluster has one CTA an SM
  // and stages its part; `grid_held` loads half of each part straight into registers, which land
  // 0.6-1.1 us sooner, and an SM holds parts of two rows: 16x128256 10.4-10.7 us against 11.8,
  // 32x151936 17.6-17.7 against 18.7-18.8 (H100). Behind where the parts come to 1024 slots or
  // fewer (8x100000: 2-5%) and against `grid` of as many CTAs (1-2%), which keep their plans;
  // past 32 rows both ways.
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
