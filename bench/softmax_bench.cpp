// SPDX-License-Identifier: MIT
// The benchmark suite: every step of the table, plus memcpy and the baselines (unfused; cuDNN
// when found), over five sweeps of shapes, each entry named `<impl>/<sweep>/M:<M>/N:<N>`:
//
//   grid       M = 4096, N = 128*i, i = 2..128 (Triton's fused-softmax grid)
//   irregular  M = 4096, N = 97*k, k = 3..168: every residue of N mod 4, so most rows start off
//              the 16-byte alignment the buffers (cudaMalloc) give row 0 (only N % 4 == 0 keeps it)
//   short      many short rows: 65536x32, 65536x64, 65536x128, 16384x256, 65536x61, 65536x127
//   long       M*N = 2^27: N = 2^14 ... 2^20 and each N + 3 (rows longer than one SM holds)
//   few        1x1048576, 8x1048576, 64x262144, 32x16384, 128x4096 (few rows: idle SMs)
//
// The one-thread-per-row steps (step00_naive, step01_online) take milliseconds per launch at large
// N, so they run on a coarser subset of the first two sweeps: the grid at N = 256, 512, 768, then
// every 1024; the irregular sweep at every 8th k (N % 4 == 0) plus k % 32 in {3, 5, 6} (the
// three other residues, from N = 291 up), and the long sweep at its aligned N. They run the whole
// short and few sweeps.
//
// Each benchmark is one Google Benchmark iteration whose manual time is the median of the common
// timer's runs (L2 flushed before each; 200 runs where the shape moves at most 64 MiB, else 30),
// so bytes_per_second is the effective bandwidth 2*M*N*4 / median. Counters: M, N, GBps,
// memcpy_GBps, ratio_to_memcpy (a memcpy of the same size, timed interleaved with the step, launch
// by launch), median_us, min_us, model_bytes (the step's traffic model), and for the baselines
// final_step_speedup: the baseline's median time over the final step's, the two timed in the same
// rounds (> 1: the final step is faster). The memcpy entries are a memcpy timed on its own, at the
// start of each sweep.
//
//   ./build/bench/softmax_bench --benchmark_out=results.json --benchmark_out_format=json
//   ./build/bench/softmax_bench --benchmark_filter='step07|memcpy'
//   ./build/bench/softmax_bench --benchmark_filter='step07.*/irregular/'
//   ./build/bench/softmax_bench --benchmark_filter='(memcpy|step07|cudnn)/short/'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "baselines/baselines.h"
#include "common/device.h"
#include "common/program.h"
#include "common/step_table.h"
#include "fastsoftmax/softmax.h"
#include "split.h"  // fastsoftmax/src: the cluster fit, for the record

namespace {

using softmax::Measurement;
using softmax::Step;

constexpr int kRows = 4096;  // M of the grid and irregular sweeps

struct Shape {
  int rows, cols;
};

// grid: N = 128*i, i = 2..128; coarse: 256, 512, 768, then every 1024.
std::vector<Shape> grid(bool coarse) {
  std::vector<Shape> s;
  for (int i = 2; i <= 128; ++i) {
    const int n = 128 * i;
    if (!coarse || n % (n < 1024 ? 256 : 1024) == 0) s.push_back({kRows, n});
  }
  return s;
}

// irregular: N = 97*k, k = 3..168 (N % 4 == k % 4); coarse: k % 8 == 0, or k % 32 in {3, 5, 6}.
std::vector<Shape> irregular(bool coarse) {
  std::vector<Shape> s;
  for (int k = 3; k <= 168; ++k) {
    if (!coarse || k % 8 == 0 || k % 32 == 3 || k % 32 == 5 || k % 32 == 6)
      s.push_back({kRows, 97 * k});
  }
  return s;
}

// short: many short rows, aligned and not.
std::vector<Shape> short_rows(bool) {
  return {{65536, 32}, {65536, 64}, {65536, 128}, {16384, 256}, {65536, 61}, {65536, 127}};
}

// long: M*N = 2^27 (512 MiB in, 512 out) for N = 2^14 ... 2^20, and each N + 3 (unaligned rows) at
// the same M; coarse: the aligned N only. Rows longer than one SM holds.
std::vector<Shape> long_rows(bool coarse) {
  std::vector<Shape> s;
  for (int e = 14; e <= 20; ++e) {
    const int rows = 1 << (27 - e);
    s.push_back({rows, 1 << e});
    if (!coarse) s.push_back({rows, (1 << e) + 3});
  }
  return s;
}

// few: few rows, long or not, that leave SMs idle under a block (or cluster) per row.
std::vector<Shape> few_rows(bool) {
  return {{1, 1048576}, {8, 1048576}, {64, 262144}, {32, 16384}, {128, 4096}};
}

struct Sweep {
  const char* name;
  std::vector<Shape> (*shapes)(bool coarse);
};
constexpr Sweep kSweeps[] = {{"grid", grid},
                             {"irregular", irregular},
                             {"short", short_rows},
                             {"long", long_rows},
                             {"few", few_rows}};

bool uses_coarse_sweeps(const std::string& name) {
  return name == "step00_naive" || name == "step01_online";
}

// "short: 65536x32,65536x64,..." from the shapes themselves.
std::string describe(const char* name, const std::vector<Shape>& shapes) {
  std::string d = std::string(name) + ":";
  for (const Shape& s : shapes)
    d += (d.back() == ':' ? " " : ",") + std::to_string(s.rows) + "x" + std::to_string(s.cols);
  return d;
}

struct Context {
  explicit Context(size_t max_elements) : buffers(max_elements) {}
  softmax::Timer timer;
  softmax::TimingBuffers buffers;
};

void report(benchmark::State& state, const Measurement& m, const std::string& label) {
  state.SetIterationTime(m.kernel.median_ms * 1e-3);
  state.SetLabel(label);
  state.counters["M"] = m.rows;
  state.counters["N"] = m.cols;
  state.counters["GBps"] = m.gbps;
  state.counters["memcpy_GBps"] = m.memcpy_gbps;
  state.counters["ratio_to_memcpy"] = m.ratio;
  state.counters["median_us"] = m.kernel.median_ms * 1e3;
  state.counters["min_us"] = m.kernel.min_ms * 1e3;
  state.counters["model_bytes"] = m.model_bytes;
  if (m.rival.runs > 0) state.counters["final_step_speedup"] = m.rival_speedup;
}

// After the loop, where state.iterations() counts the finished iteration: bytes_per_second is
// then 2*M*N*4 / median time, the effective bandwidth.
void set_bytes(benchmark::State& state, Shape sh) {
  state.SetBytesProcessed(int64_t(2) * sh.rows * sh.cols * int64_t(sizeof(float)) *
                          state.iterations());
}

// A baseline (`rival` set) is timed in the same rounds as the final step, head to head.
void bench_step(benchmark::State& state, Context* ctx, Step step, Shape sh,
                std::optional<Step> rival = std::nullopt) {
  for (auto _ : state) {
    try {
      report(state,
             softmax::measure(step, ctx->timer, ctx->buffers, sh.rows, sh.cols,
                              softmax::sweep_runs(sh.rows, sh.cols),
                              rival ? &*rival : nullptr),
             step.name);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
  set_bytes(state, sh);
}

void bench_memcpy(benchmark::State& state, Context* ctx, Shape sh) {
  for (auto _ : state) {
    Measurement m;
    m.rows = sh.rows;
    m.cols = sh.cols;
    const size_t bytes = size_t(sh.rows) * sh.cols * sizeof(float);
    m.kernel = m.memcpy = ctx->timer.time_memcpy(ctx->buffers.y(), ctx->buffers.x(), bytes,
                                                 softmax::sweep_runs(sh.rows, sh.cols));
    m.gbps = m.memcpy_gbps = softmax::effective_gbps(sh.rows, sh.cols, m.kernel.median_ms);
    m.ratio = 1.0;
    m.model_bytes = softmax::kIdealTraffic.bytes(sh.rows, sh.cols);
    report(state, m, "memcpy");
  }
  set_bytes(state, sh);
}

// `<impl>/<sweep>/M:<M>/N:<N>`: tools/plot_results.py, tools/bench_summary.py and
// tools/torch_softmax_bench.py key on this form.
template <typename Fn>
void add(const std::string& impl, const Sweep& sweep, Shape sh, Fn fn) {
  const std::string name =
      impl + "/" + sweep.name + "/M:" + std::to_string(sh.rows) + "/N:" + std::to_string(sh.cols);
  benchmark::RegisterBenchmark(name.c_str(), fn)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!softmax::require_gpu("softmax_bench")) return softmax::kExitNoGpu;
  try {
    const softmax::DeviceInfo dev = softmax::query_device();
    benchmark::AddCustomContext("gpu_name", dev.name);
    benchmark::AddCustomContext("gpu_sm_count", std::to_string(dev.sm_count));
    benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(dev.l2_bytes));
    benchmark::AddCustomContext("gpu_peak_gbps", std::to_string(dev.peak_gbps));
    benchmark::AddCustomContext("driver", dev.kernel_driver);
    benchmark::AddCustomContext("driver_cuda", dev.driver_string());
    benchmark::AddCustomContext("runtime_cuda", dev.runtime_string());
    benchmark::AddCustomContext("rows", std::to_string(kRows));
    benchmark::AddCustomContext(
        "sweeps",
        "grid: M=4096 N=128*i i=2..128; irregular: M=4096 N=97*k k=3..168; " +
            describe("short", short_rows(false)) +
            "; long: M*N=2^27 N=2^14..2^20 and N+3; " + describe("few", few_rows(false)));
    benchmark::AddCustomContext("coarse_sweeps",
                                "step00_naive,step01_online: grid N=256,512,768 then every 1024; "
                                "irregular k%8==0 or k%32 in {3,5,6}; short: all; long: N=2^k only; "
                                "few: all");
    benchmark::AddCustomContext("timed_runs", std::to_string(softmax::kShortShapeRuns) + " or " +
                                                  std::to_string(softmax::kSweepRuns));
    benchmark::AddCustomContext("timed_runs_rule", softmax::kSweepRunsRule);
    std::string order = "memcpy";
    for (const Step& s : softmax::all_implementations()) order += std::string(",") + s.name;
    for (const Step& s : baselines::all()) order += std::string(",") + s.name;
    benchmark::AddCustomContext("implementations", order);
    benchmark::AddCustomContext("final_step", softmax::all_implementations().back().name);
    benchmark::AddCustomContext("memcpy_timing", "interleaved with each step, launch by launch");
    // The library's plans depend on the chip: how many clusters fit at once (by CTAs per
    // cluster), and the path each shape of each sweep takes (fastsoftmax::describe, for 16-byte
    // aligned buffers such as the benchmark's): "sweep/MxN=path;...".
    benchmark::AddCustomContext("fastsoftmax_cluster_fit",
                                fastsoftmax::detail::cluster_fit_report());
    std::string paths, plans;
    for (const Sweep& sw : kSweeps) {
      for (Shape sh : sw.shapes(false)) {
        const fastsoftmax::Plan plan = softmax::library_plan(sh.rows, sh.cols);
        const std::string shape = std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
        paths += (paths.empty() ? "" : ";") + std::string(sw.name) + "/" + shape + "=" + plan.path;
        if (std::string(sw.name) == "few" || std::string(sw.name) == "long")
          plans += (plans.empty() ? "" : "; ") + shape + " " + plan.path + ": " + plan.config;
      }
    }
    benchmark::AddCustomContext("fastsoftmax_paths", paths);
    benchmark::AddCustomContext("fastsoftmax_plans", plans);
    for (const Step& s : softmax::all_implementations()) benchmark::AddCustomContext(std::string("lesson:") + s.name, s.lesson);
    for (const Step& s : baselines::all()) benchmark::AddCustomContext(std::string("lesson:") + s.name, s.lesson);

    size_t max_elements = 0;
    for (const Sweep& sw : kSweeps)
      for (Shape sh : sw.shapes(false))
        max_elements = std::max(max_elements, size_t(sh.rows) * sh.cols);
    Context ctx(max_elements);
    const std::vector<Step> steps = softmax::all_implementations();
    const Step final_step = steps.back();
    for (const Sweep& sw : kSweeps) {
      for (Shape sh : sw.shapes(false))
        add("memcpy", sw, sh, [&ctx, sh](benchmark::State& st) { bench_memcpy(st, &ctx, sh); });
      for (const Step& s : steps) {
        for (Shape sh : sw.shapes(uses_coarse_sweeps(s.name)))
          add(s.name, sw, sh, [&ctx, s, sh](benchmark::State& st) { bench_step(st, &ctx, s, sh); });
      }
      for (const Step& s : baselines::all()) {
        for (Shape sh : sw.shapes(false))
          add(s.name, sw, sh, [&ctx, s, sh, final_step](benchmark::State& st) {
            bench_step(st, &ctx, s, sh, final_step);
          });
      }
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "softmax_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
