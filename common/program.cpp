// SPDX-License-Identifier: MIT
#include "common/program.h"

#include <cstdio>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/data.h"
#include "common/device.h"
#include "common/json.h"
#include "common/verify.h"

namespace softmax {

TimingBuffers::TimingBuffers(size_t max_elements) : x_(max_elements), y_(max_elements) {
  // One 4096-column "row" of the generator per chunk keeps the outlier density the same as in the
  // verification input.
  const int cols = 4096;
  const int rows = static_cast<int>((max_elements + cols - 1) / cols);
  const std::vector<float> host = make_input(rows, cols, /*seed=*/20181104);
  CUDA_CHECK(cudaMemcpy(x_.get(), host.data(), max_elements * sizeof(float),
                        cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(y_.get(), 0, max_elements * sizeof(float)));
}

Measurement measure(const Step& step, Timer& timer, const TimingBuffers& buf, int rows, int cols,
                    int iters, const Step* rival) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (n > buf.capacity()) throw std::invalid_argument("measure: shape exceeds the buffers");
  const size_t bytes = n * sizeof(float);
  std::vector<Timer::Enqueue> enqueues = {
      [&](cudaStream_t s) { step.launch(buf.x(), buf.y(), rows, cols, s); },
      Timer::memcpy_enqueue(buf.y(), buf.x(), bytes)};
  if (rival != nullptr)
    enqueues.push_back([&](cudaStream_t s) { rival->launch(buf.x(), buf.y(), rows, cols, s); });
  const std::vector<Timing> t = timer.time_interleaved(enqueues, iters);
  Measurement m;
  if (rival != nullptr) {
    m.rival = t[2];
    m.rival_speedup = t[0].median_ms / t[2].median_ms;
  }
  m.rows = rows;
  m.cols = cols;
  m.kernel = t[0];
  m.memcpy = t[1];
  m.gbps = effective_gbps(rows, cols, m.kernel.median_ms);
  m.memcpy_gbps = effective_gbps(rows, cols, m.memcpy.median_ms);
  m.ratio = m.gbps / m.memcpy_gbps;
  m.model_bytes = step.traffic(cols).bytes(rows, cols);
  return m;
}

namespace {

struct VerifyCase {
  int rows, cols;
  VerifyResult result;
};

struct StepReport {
  std::vector<VerifyCase> verified;
  std::vector<Measurement> sweep;
  bool ok = true;
};

void print_traffic(const Step& step, int cols) {
  const Traffic t = step.traffic(cols);
  std::printf("traffic model: %.3g reads + %.3g writes per element = %.3g bytes/element "
              "(fused ideal: 8)\n",
              t.reads_per_elem, t.writes_per_elem, 4 * (t.reads_per_elem + t.writes_per_elem));
}

StepReport run_step(const Step& step, const Options& opt) {
  StepReport rep;
  std::printf("\n=== %s: %s ===\n", step.name, step.lesson);
  const int limit = step.max_cols();
  if (limit != kNoColLimit) std::printf("largest N on this device: %d\n", limit);
  print_traffic(step, opt.cols ? opt.cols : kVerifyCols);

  std::vector<std::pair<int, int>> shapes = {{kVerifyRows, kVerifyCols}};
  if (opt.cols) shapes.push_back({opt.rows, opt.cols});
  for (auto [rows, cols] : shapes) {
    VerifyResult r = check_step(step, rows, cols, InputKind::kNormal, next_seed());
    std::printf("verify %dx%d: %s\n", rows, cols, r.report().c_str());
    rep.ok = rep.ok && r.ok();
    rep.verified.push_back({rows, cols, r});
  }
  if (!rep.ok || opt.verify_only) return rep;

  const std::vector<int> cols_list = opt.cols ? std::vector<int>{opt.cols} : sweep_cols();
  int max_cols = 0;
  for (int c : cols_list) max_cols = std::max(max_cols, c);
  TimingBuffers buf(static_cast<size_t>(opt.rows) * max_cols);
  Timer timer;
  std::printf("\nbandwidth, M = %d, median of %d runs, L2 flushed before each\n", opt.rows, opt.iters);
  std::printf("%7s %11s %9s %12s %9s %13s\n", "N", "time (us)", "GB/s", "memcpy GB/s",
              "ratio", "model MB");
  for (int cols : cols_list) {
    const Measurement m = measure(step, timer, buf, opt.rows, cols, opt.iters);
    std::printf("%7d %11.2f %9.1f %12.1f %9.3f %13.1f\n", cols, m.kernel.median_ms * 1e3, m.gbps,
                m.memcpy_gbps, m.ratio, m.model_bytes / 1e6);
    std::fflush(stdout);
    rep.sweep.push_back(m);
  }
  return rep;
}

void write_step_json(JsonWriter& j, const Step& step, const StepReport& rep, int cols) {
  const Traffic t = step.traffic(cols);
  j.begin_object();
  j.field("step", step.name).field("lesson", step.lesson);
  j.field("max_cols", step.max_cols());
  j.begin_object("traffic_per_element")
      .field("reads", t.reads_per_elem)
      .field("writes", t.writes_per_elem)
      .end_object();
  j.begin_array("verify");
  for (const VerifyCase& v : rep.verified) {
    j.begin_object()
        .field("rows", v.rows)
        .field("cols", v.cols)
        .field("ok", v.result.ok())
        .field("max_abs_err", v.result.max_abs_err)
        .field("max_rel_err", v.result.max_rel_err)
        .field("max_row_sum_err", v.result.max_row_sum_err)
        .field("bad_elements", static_cast<long long>(v.result.bad_elements))
        .end_object();
  }
  j.end_array();
  j.begin_array("bandwidth");
  for (const Measurement& m : rep.sweep) {
    j.begin_object()
        .field("rows", m.rows)
        .field("cols", m.cols)
        .field("median_us", m.kernel.median_ms * 1e3)
        .field("min_us", m.kernel.min_ms * 1e3)
        .field("runs", m.kernel.runs)
        .field("gbps", m.gbps)
        .field("memcpy_median_us", m.memcpy.median_ms * 1e3)
        .field("memcpy_gbps", m.memcpy_gbps)
        .field("ratio_to_memcpy", m.ratio)
        .field("model_bytes", m.model_bytes)
        .end_object();
  }
  j.end_array();
  j.end_object();
}

// Everything the programs do, for one or several steps. Never throws.
int run_programs(int argc, char** argv, const std::vector<Step>& steps, bool summary) {
  const std::string program = argc > 0 ? argv[0] : "softmax";
  Options opt;
  try {
    opt = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n(run with --help for the options)\n", program.c_str(), e.what());
    return 2;
  }
  if (opt.help) {
    std::printf("%s", usage(program).c_str());
    return 0;
  }
  if (!require_gpu(program)) return kExitNoGpu;
  try {
    for (const Step& s : steps) {
      if (opt.cols > s.max_cols()) {
        std::fprintf(stderr, "%s: --cols %d exceeds %s's limit of %d on this device\n",
                     program.c_str(), opt.cols, s.name, s.max_cols());
        return 2;
      }
    }
    const DeviceInfo dev = query_device();
    std::printf("%s\n", dev.summary().c_str());

    std::vector<StepReport> reports;
    bool ok = true;
    for (const Step& s : steps) {
      reports.push_back(run_step(s, opt));
      ok = ok && reports.back().ok;
    }

    if (summary && !opt.verify_only) {
      std::printf("\n=== summary, M = %d: effective GB/s (ratio to memcpy) ===\n%-22s", opt.rows, "step");
      for (const Measurement& m : reports.front().sweep) std::printf(" %16d", m.cols);
      std::printf("\n");
      for (size_t i = 0; i < steps.size(); ++i) {
        std::printf("%-22s", steps[i].name);
        for (const Measurement& m : reports[i].sweep) std::printf(" %8.0f (%4.2f)", m.gbps, m.ratio);
        std::printf("\n");
      }
    }

    if (!opt.json_path.empty() && ok) {
      JsonWriter j;
      j.begin_object();
      j.field("command", command_line(argc, argv));
      j.begin_object("device")
          .field("name", dev.name)
          .field("sm_count", dev.sm_count)
          .field("l2_bytes", dev.l2_bytes)
          .field("peak_gbps", dev.peak_gbps)
          .field("driver", dev.kernel_driver)
          .field("driver_cuda", dev.driver_string())
          .field("runtime_cuda", dev.runtime_string())
          .end_object();
      j.begin_array("steps");
      for (size_t i = 0; i < steps.size(); ++i)
        write_step_json(j, steps[i], reports[i], opt.cols ? opt.cols : kVerifyCols);
      j.end_array();
      j.end_object();
      std::ofstream out(opt.json_path);
      out << j.str() << "\n";
      if (!out) {
        std::fprintf(stderr, "%s: could not write %s\n", program.c_str(), opt.json_path.c_str());
        return 1;
      }
      std::printf("\nwrote %s\n", opt.json_path.c_str());
    }
    if (!ok) {
      std::fprintf(stderr, "%s: verification FAILED\n", program.c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
}

}  // namespace

std::string command_line(int argc, char** argv) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  return cmd;
}

int step_main(int argc, char** argv, const Step& step) { return run_programs(argc, argv, {step}, false); }

int tour_main(int argc, char** argv, const std::vector<Step>& steps) {
  return run_programs(argc, argv, steps, true);
}

}  // namespace softmax
