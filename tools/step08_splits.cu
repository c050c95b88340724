// SPDX-License-Identifier: MIT
// step08_splits: step08's split paths forced to a given path and K, timed beside step07 and
// memcpy (the experiments of docs/notes/step08.md). Shapes and plans are listed in main(); the
// first experiment's list is in docs/results/step08_experiments_h100.txt. With ROWS COLS c|g|n K
// it runs one launch of that plan (for ncu).
//   build/softmax_step08_splits [ITERS [ROWS COLS c|g|n K]]
#include <cstdio>
#include <string>
#include <vector>
#include <algorithm>
#include "common/device.h"
#include "common/program.h"
#include "common/softmax.h"
#include "common/timer.h"
#include "common/verify.h"
#include "step08_cluster/split.h"
namespace step07_persistent { const softmax::Step& step(); }
namespace step08_cluster { const softmax::Step& step(); }
using namespace step08_cluster;
static Split g_path; static int g_parts; static long g_groups;
static void forced(const float* x, float* y, int rows, int cols, cudaStream_t s) {
  softmax::check_launch_args("forced", x, y, rows, cols, softmax::kNoColLimit);
  auto p = make_split(g_path, g_parts, rows, cols); if (g_groups) p.groups = std::min<long>(g_groups, rows);
  launch_split(p, x, y, rows, cols, s);
}
static int maxc() { return softmax::kNoColLimit; }
static softmax::Traffic tr(int) { return softmax::kIdealTraffic; }
struct V { int rows, cols; Split path; int parts; long groups = 0; };
int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 30;
  std::printf("%s\n", softmax::query_device().summary().c_str());
  std::printf("%s\n", cluster_report().c_str());
  const Split C = Split::kCluster, G = Split::kGrid, N = Split::kNone;
  std::vector<V> vs = {
    {4096,32768,N,0},{4096,32768,C,2,4096},{4096,32768,C,2,66},
    {2048,65536,C,4},{2048,65536,C,4,2048},{2048,65536,G,4},{2048,65536,C,2},
    {1024,131072,C,8},{1024,131072,C,8,1024},{1024,131072,C,4},
    {512,262144,G,16},{512,262144,G,8},
  };
  if (argc > 2) { vs = {{atoi(argv[2]), atoi(argv[3]), argv[4][0]=='c' ? C : argv[4][0]=='g' ? G : N, atoi(argv[5])}}; }

  size_t most = 0; for (auto& v : vs) most = std::max(most, size_t(v.rows) * v.cols);
  softmax::TimingBuffers buf(most);
  softmax::Timer timer;
  const softmax::Step& s7 = step07_persistent::step();
  const softmax::Step& s8 = step08_cluster::step();
  const softmax::Step fs{"forced", "", forced, maxc, tr};
  std::printf("%8s %8s %-34s %9s %7s %8s %s\n", "rows", "cols", "plan", "us", "ratio", "s07/this", "verify");
  for (auto& v : vs) {
    try {
      g_path = v.path; g_parts = v.parts; g_groups = v.groups;
      const softmax::Step& st = v.path == N ? s8 : fs;
      std::string plan = v.path == N ? "default: " + describe(plan_split(v.rows, v.cols))
                                     : describe(make_split(v.path, v.parts, v.rows, v.cols)) + (v.groups ? " ->" + std::to_string(v.groups) : "");
      softmax::VerifyResult r;
      int vr = std::min(v.rows, 40);
      if (argc <= 2) for (auto kind : {softmax::InputKind::kNormal, softmax::InputKind::kNonFinite, softmax::InputKind::kMaxAtEnds, softmax::InputKind::kOneFiniteAtEnds}) {
        r = softmax::check_step(st, vr, v.cols, kind, 99 + v.cols, {v.cols % 4 ? 1 : 0, v.cols % 4 ? 1 : 0});
        if (!r.ok()) break;
      }
      if (argc > 2) { float *x=buf.x(), *y=buf.y(); st.launch(x, y, v.rows, v.cols, 0); cudaDeviceSynchronize(); std::printf("one launch done\n"); continue; }
      auto m = softmax::measure(st, timer, buf, v.rows, v.cols, iters, &s7);
      std::printf("%8d %8d %-34s %9.2f %7.3f %8.3f %s\n", v.rows, v.cols, plan.c_str(), m.kernel.median_ms*1e3, m.ratio, m.rival.median_ms / m.kernel.median_ms, r.ok() ? "ok" : r.report().c_str());
    } catch (const std::exception& e) {
      std::printf("%8d %8d error: %s\n", v.rows, v.cols, e.what());
    }
    std::fflush(stdout);
  }
}
