// SPDX-License-Identifier: MIT
// step08_splits: step08's split paths forced to a given path and CTAs per row, timed beside
// step07 and memcpy: the experiments of docs/notes/step08.md.
//
//   build/softmax_step08_splits [--iters K]                    the built-in list (experiment 2)
//   build/softmax_step08_splits [--iters K] [--verify-rows R]
//                               ROWSxCOLS:PATH[:K[:GROUPS[:THREADS]]] ...
//   build/softmax_step08_splits --one ROWS COLS PATH K [GROUPS]
//
// PATH: cluster, grid, held (paths g, h, i), cluster-held ((g) with (i)'s parts), or default
// (step08's own choice); grid-tagged and grid-counted: path (h) with its pairs as tagged words or
// behind the counter, whatever make_split chose; held-regs and cluster-regs: held and cluster-held
// with enough float4 a thread in registers to hold the whole part (none in the stage); THREADS:
// CTAs of 1024 threads for held and cluster-held, 128 for cluster (make_split's sizes), else 512.
//
// The list: for each entry, verification (four input kinds, at most R rows: 40 unless
// --verify-rows says otherwise; rows off 16-byte boundaries when N % 4 != 0), then the median of
// K launches with L2 flushed, memcpy and step07 timed interleaved with it: ratio to memcpy, and
// step07's time over this plan's. GROUPS > 0 runs
// that many clusters or groups instead of the plan's (GROUPS = ROWS: one per row, no loop).
// --one: a single unverified launch of one plan, for Nsight Compute. "default" is step08's own
// choice (K ignored). Experiment 1's list and output are in docs/results/step08_experiments_h100.txt.
// Exit codes: 0 ok, 1 a verification or CUDA failure, 2 bad usage, 77 no GPU or no clusters.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/device.h"
#include "common/program.h"
#include "common/softmax.h"
#include "common/step_table.h"
#include "common/timer.h"
#include "common/verify.h"
#include "step08_cluster/split.h"

namespace {

using step08_cluster::Split;

struct Plan {
  int rows, cols;
  Split path;  // kNone: step08's own choice
  int parts;
  long groups = 0;  // > 0: this many clusters or groups instead of the plan's
  int threads = 0;  // > 0: CTAs of this many threads instead of 512
  int tagged = -1;  // 0 or 1: (h)'s pairs counted or as tagged words, instead of the plan's
  bool regs = false;  // held paths with every slot in registers (packs to hold the part)
};

// The plan the forced launcher runs (a softmax::Step launcher carries no state of its own).
Plan g_plan;

step08_cluster::SplitPlan split_of(const Plan& p, int rows, int cols) {
  auto s = p.threads > 0 ? step08_cluster::make_split(p.path, p.parts, rows, cols, p.threads)
                         : step08_cluster::make_split(p.path, p.parts, rows, cols);
  if (p.groups > 0) s.groups = std::min<long>(p.groups, rows);
  if (p.tagged >= 0) s.tagged = p.tagged == 1;
  if (p.regs) {
    const int packs = (s.chunk + s.threads - 1) / s.threads;
    if (packs > 8)
      throw std::invalid_argument("a part in registers would need more than 8 float4 per thread");
    s.packs = packs <= 1 ? 1 : packs <= 2 ? 2 : packs <= 4 ? 4 : 8;
  }
  return s;
}

void forced_launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step08_splits", x, y, rows, cols, softmax::kNoColLimit);
  step08_cluster::launch_split(split_of(g_plan, rows, cols), x, y, rows, cols, stream);
}
int no_limit() { return softmax::kNoColLimit; }
softmax::Traffic ideal(int) { return softmax::kIdealTraffic; }

std::string describe(const Plan& p) {
  if (p.path == Split::kNone)
    return "default: " + step08_cluster::describe(step08_cluster::plan_split(p.rows, p.cols));
  return step08_cluster::describe(split_of(p, p.rows, p.cols));
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--iters K] [--verify-rows R]\n"
               "           [ROWSxCOLS:PATH[:K[:GROUPS[:THREADS]]] ...]\n"
               "       %s --one ROWS COLS PATH K [GROUPS]\n"
               "PATH: cluster, grid, grid-tagged, grid-counted, held, cluster-held, held-regs,\n"
               "      cluster-regs or default\n",
               argv0, argv0);
  return 2;
}

// grid-tagged and grid-counted: path (h) with its pairs one way or the other (-1: the plan's).
// cluster-regs and held-regs: the held paths with no slot in the stage.
bool regs_of(const std::string& name) { return name == "cluster-regs" || name == "held-regs"; }

int tagged_of(const std::string& name) {
  return name == "grid-tagged" ? 1 : name == "grid-counted" ? 0 : -1;
}

Split path_of(std::string name) {
  if (tagged_of(name) >= 0) name = "grid";
  if (regs_of(name)) name = name.substr(0, name.size() - 5) == "held" ? "held" : "cluster-held";
  if (name == "cluster") return Split::kCluster;
  if (name == "grid") return Split::kGrid;
  if (name == "held") return Split::kHeld;
  if (name == "cluster-held") return Split::kClusterHeld;
  if (name == "default") return Split::kNone;
  throw softmax::UsageError("unknown path '" + name + "'");
}

// ROWSxCOLS:PATH[:K[:GROUPS[:THREADS]]]
Plan plan_of(const std::string& spec) {
  std::vector<std::string> f;
  size_t from = 0;
  for (size_t at; (at = spec.find(':', from)) != std::string::npos; from = at + 1)
    f.push_back(spec.substr(from, at - from));
  f.push_back(spec.substr(from));
  if (f.size() < 2 || f.size() > 5)
    throw softmax::UsageError("a plan is ROWSxCOLS:PATH[:K[:GROUPS[:THREADS]]], not '" + spec +
                              "'");
  const softmax::RowsCols shape = softmax::parse_shape(f[0]);
  const int tagged = tagged_of(f[1]);
  return {shape.rows,
          shape.cols,
          path_of(f[1]),
          f.size() > 2 ? softmax::parse_int("K", f[2].c_str(), 0) : 0,
          f.size() > 3 ? softmax::parse_int("GROUPS", f[3].c_str(), 0) : 0,
          f.size() > 4 ? softmax::parse_int("THREADS", f[4].c_str(), 0) : 0,
          tagged,
          regs_of(f[1])};
}

}  // namespace

int main(int argc, char** argv) {
  const Split C = Split::kCluster, G = Split::kGrid, N = Split::kNone;
  std::vector<Plan> plans = {
      {4096, 32768, N, 0},  {4096, 32768, C, 2, 4096},   {4096, 32768, C, 2, 66},
      {2048, 65536, C, 4},  {2048, 65536, C, 4, 2048},   {2048, 65536, G, 4},
      {1024, 131072, C, 8}, {1024, 131072, C, 8, 1024}, {512, 262144, G, 16},
  };
  long iters = 30;
  long verify_rows = 40;
  bool one = false;
  try {
    if ((argc == 6 || argc == 7) && std::string(argv[1]) == "--one") {
      plans = {{softmax::parse_int("ROWS", argv[2], 1), softmax::parse_int("COLS", argv[3], 1),
                path_of(argv[4]), softmax::parse_int("K", argv[5], 0),
                argc == 7 ? softmax::parse_int("GROUPS", argv[6], 0) : 0, 0, tagged_of(argv[4])}};
      one = true;
    } else {
      int a = 1;
      for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
        const std::string opt = argv[a];
        if (opt == "--iters")
          iters = softmax::parse_int("--iters", argv[a + 1], softmax::kMinRuns);
        else if (opt == "--verify-rows")
          verify_rows = softmax::parse_int("--verify-rows", argv[a + 1], 1);
        else
          throw softmax::UsageError("unknown option '" + opt + "'");
      }
      if (a < argc) plans.clear();
      for (; a < argc; ++a) plans.push_back(plan_of(argv[a]));
    }
  } catch (const softmax::UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return usage(argv[0]);
  }

  if (!softmax::require_gpu(argv[0])) return softmax::kExitNoGpu;
  std::printf("%s\n%s\n", softmax::query_device().summary().c_str(),
              step08_cluster::cluster_report().c_str());
  if (!step08_cluster::clusters_usable()) return softmax::kExitNoGpu;

  const softmax::Step* step07 = softmax::find_step("step07_persistent");
  const softmax::Step* step08 = softmax::find_step("step08_cluster");
  const softmax::Step forced{"step08_forced_split", "one split path", forced_launch, no_limit,
                             ideal};
  int failed = 0;
  try {
    size_t most = 0;
    for (const Plan& p : plans) most = std::max(most, size_t(p.rows) * p.cols);
    softmax::TimingBuffers buf(most);
    softmax::Timer timer;
    std::printf("%8s %8s %-34s %9s %7s %8s  %s\n", "rows", "cols", "plan", "us", "ratio",
                "s07/this", "verified");
    for (const Plan& p : plans) {
      g_plan = p;
      const softmax::Step& step = p.path == N ? *step08 : forced;
      try {
        const std::string plan = describe(p) + (p.groups ? " ->" + std::to_string(p.groups) : "");
        if (one) {
          step.launch(buf.x(), buf.y(), p.rows, p.cols, 0);
          CUDA_CHECK(cudaDeviceSynchronize());
          std::printf("%8d %8d %-34s one launch\n", p.rows, p.cols, plan.c_str());
          continue;
        }
        softmax::VerifyResult r;
        const int offset = p.cols % 4 ? 1 : 0;
        for (auto kind : {softmax::InputKind::kNormal, softmax::InputKind::kNonFinite,
                          softmax::InputKind::kMaxAtEnds, softmax::InputKind::kOneFiniteAtEnds}) {
          r = softmax::check_step(step, int(std::min<long>(p.rows, verify_rows)), p.cols, kind,
                                  99 + p.cols,
                                  {offset, offset});
          if (!r.ok()) break;
        }
        if (!r.ok()) ++failed;
        const softmax::Measurement m =
            softmax::measure(step, timer, buf, p.rows, p.cols, int(iters), step07);
        std::printf("%8d %8d %-34s %9.2f %7.3f %8.3f  %s\n", p.rows, p.cols, plan.c_str(),
                    m.kernel.median_ms * 1e3, m.ratio, m.rival.median_ms / m.kernel.median_ms,
                    r.ok() ? "ok" : r.report().c_str());
      } catch (const std::invalid_argument& e) {  // a plan that cannot run: reported, not fatal
        std::printf("%8d %8d not run: %s\n", p.rows, p.cols, e.what());
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step08_splits: %s\n", e.what());
    return 1;
  }
  return failed ? 1 : 0;
}
