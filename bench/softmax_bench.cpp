// SPDX-License-Identifier: MIT
// The benchmark suite: every step of the table, plus memcpy and the baselines (unfused; cuDNN
// when found), at M = 4096 rows and N = 128*i, i = 2..128 (Triton's fused-softmax grid).
//
// Each benchmark is one Google Benchmark iteration whose manual time is the median of the common
// timer's runs (L2 flushed before each), so bytes_per_second is the effective bandwidth
// 2*M*N*4 / median. Counters: GBps, memcpy_GBps, ratio_to_memcpy (a memcpy of the same size,
// timed interleaved with the step, launch by launch), median_us, min_us, model_bytes (the step's
// traffic model), and for the baselines final_step_speedup: the baseline's median time over the
// final step's, the two timed in the same rounds (> 1: the final step is faster). The memcpy
// rows are a memcpy timed on its own at the start of the run.
//
//   ./build/bench/softmax_bench --benchmark_out=results.json --benchmark_out_format=json
//   ./build/bench/softmax_bench --benchmark_filter='step07|memcpy'
#include <benchmark/benchmark.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "baselines/baselines.h"
#include "common/device.h"
#include "common/program.h"
#include "common/step_table.h"

namespace {

using softmax::Measurement;
using softmax::Step;

constexpr int kRows = 4096;
constexpr int kRuns = 30;

// N = 128*i, i = 2..128.
std::vector<int> full_grid() {
  std::vector<int> cols;
  for (int i = 2; i <= 128; ++i) cols.push_back(128 * i);
  return cols;
}

// The one-thread-per-row steps take up to tens of milliseconds per launch at large N: they are
// measured on a coarser grid (256, 512, 768, then every 1024) to keep a full run near 5 minutes.
std::vector<int> coarse_grid() {
  std::vector<int> cols = {256, 512, 768};
  for (int n = 1024; n <= 128 * 128; n += 1024) cols.push_back(n);
  return cols;
}
bool uses_coarse_grid(const std::string& name) {
  return name == "step00_naive" || name == "step01_online";
}

struct Context {
  softmax::Timer timer;
  softmax::TimingBuffers buffers{size_t(kRows) * 128 * 128};
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
void set_bytes(benchmark::State& state, int cols) {
  state.SetBytesProcessed(int64_t(2) * kRows * cols * int64_t(sizeof(float)) * state.iterations());
}

// A baseline (`rival` set) is timed in the same rounds as the final step, head to head.
void bench_step(benchmark::State& state, Context* ctx, Step step, int cols,
                std::optional<Step> rival = std::nullopt) {
  for (auto _ : state) {
    try {
      report(state,
             softmax::measure(step, ctx->timer, ctx->buffers, kRows, cols, kRuns,
                              rival ? &*rival : nullptr),
             step.name);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
  set_bytes(state, cols);
}

void bench_memcpy(benchmark::State& state, Context* ctx, int cols) {
  for (auto _ : state) {
    Measurement m;
    m.rows = kRows;
    m.cols = cols;
    const size_t bytes = size_t(kRows) * cols * sizeof(float);
    m.kernel = m.memcpy = ctx->timer.time_memcpy(ctx->buffers.y(), ctx->buffers.x(), bytes, kRuns);
    m.gbps = m.memcpy_gbps = softmax::effective_gbps(kRows, cols, m.kernel.median_ms);
    m.ratio = 1.0;
    m.model_bytes = softmax::kIdealTraffic.bytes(kRows, cols);
    report(state, m, "memcpy");
  }
  set_bytes(state, cols);
}

template <typename Fn>
void add(const std::string& name, int cols, Fn fn) {
  benchmark::RegisterBenchmark((name + "/N:" + std::to_string(cols)).c_str(), fn)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  std::string why;
  if (!softmax::gpu_available(&why)) {
    std::fprintf(stderr, "softmax_bench: %s; nothing to measure (exit code %d means skipped)\n",
                 why.c_str(), softmax::kExitNoGpu);
    return softmax::kExitNoGpu;
  }
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
    benchmark::AddCustomContext("timed_runs", std::to_string(kRuns));
    std::string order = "memcpy";
    for (const Step& s : softmax::all_steps()) order += std::string(",") + s.name;
    for (const Step& s : baselines::all()) order += std::string(",") + s.name;
    benchmark::AddCustomContext("implementations", order);
    benchmark::AddCustomContext("final_step", softmax::all_steps().back().name);
    benchmark::AddCustomContext("memcpy_timing", "interleaved with each step, launch by launch");
    for (const Step& s : softmax::all_steps()) benchmark::AddCustomContext(std::string("lesson:") + s.name, s.lesson);
    for (const Step& s : baselines::all()) benchmark::AddCustomContext(std::string("lesson:") + s.name, s.lesson);

    Context ctx;
    for (int cols : full_grid()) add("memcpy", cols, [&ctx, cols](benchmark::State& st) { bench_memcpy(st, &ctx, cols); });
    const std::vector<Step> steps = softmax::all_steps();
    for (const Step& s : steps) {
      for (int cols : uses_coarse_grid(s.name) ? coarse_grid() : full_grid())
        add(s.name, cols, [&ctx, s, cols](benchmark::State& st) { bench_step(st, &ctx, s, cols); });
    }
    const Step final_step = steps.back();
    for (const Step& s : baselines::all()) {
      for (int cols : full_grid())
        add(s.name, cols, [&ctx, s, cols, final_step](benchmark::State& st) {
          bench_step(st, &ctx, s, cols, final_step);
        });
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "softmax_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
