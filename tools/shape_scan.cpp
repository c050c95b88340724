// SPDX-License-Identifier: MIT
// shape_scan: the library on shapes drawn at random, away from the benchmark's sweeps. The
// benchmark measures it on fixed grids; a plan can be tuned to those grids and fall off a cliff
// next to them. This draws rows x cols at random (log-uniform in the number of elements, 2^10 ..
// 2^27, and in N, 1 .. 2^21), verifies the library at each, and times memcpy, the final lesson
// (step08_cluster), the library and cuDNN (when built with it) interleaved in the same rounds.
//
//   build/softmax_shape_scan [--seed S] [--count K] [--iters R] [--json FILE] [ROWSxCOLS ...]
//   build/softmax_shape_scan --list [--seed S] [--count K]    the shapes only (no GPU needed)
//
// Defaults: seed 1, 48 shapes, timed rounds as the benchmark's (softmax::sweep_runs: 200 where a
// shape moves at most 64 MiB, 30 above; --iters R: R at every shape). Shapes given as arguments
// are scanned after the drawn ones (--count 0: only those). A shape of more than 2^25 elements
// is timed but not verified (the double-precision CPU reference would take seconds each; the
// tests verify every path at that size). The JSON (tools/scan_table.py renders it) is written
// only when every verified shape passed. Exit codes: 0 ok, 1 a verification or CUDA failure, 2
// bad usage, 77 no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "baselines/baselines.h"
#include "common/cli.h"
#include "common/device.h"
#include "common/json.h"
#include "common/program.h"
#include "common/step_table.h"
#include "common/timer.h"
#include "common/verify.h"
#include "fastsoftmax/softmax.h"
#include "split.h"  // fastsoftmax/src: the cluster fit, for the record

namespace {

struct Shape {
  int rows, cols;
};

constexpr int kMinLog2Elements = 10, kMaxLog2Elements = 27, kMaxLog2Cols = 21;
constexpr int64_t kMaxVerified = int64_t(1) << 25;

// log2(M*N) uniform in [10, 27], log2(N) uniform in [0, min(that, 21)], both then rounded to
// integers: every row count and row length, not powers of two.
std::vector<Shape> draw(uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> total(kMinLog2Elements, kMaxLog2Elements);
  std::vector<Shape> shapes;
  for (int i = 0; i < count; ++i) {
    const double t = total(rng);
    std::uniform_real_distribution<double> width(0, std::min<double>(t, kMaxLog2Cols));
    const double u = width(rng);
    const auto cols = static_cast<int>(std::max(1.0, std::round(std::exp2(u))));
    const auto rows = static_cast<int>(std::max(1.0, std::round(std::exp2(t) / cols)));
    shapes.push_back({rows, cols});
  }
  return shapes;
}

Shape parse_shape(const std::string& text) {
  const softmax::RowsCols rc = softmax::parse_shape(text);
  const Shape s{rc.rows, rc.cols};
  if (int64_t(s.rows) * s.cols > (int64_t(1) << kMaxLog2Elements))
    throw softmax::UsageError("shape '" + text + "': more than 2^27 elements");
  return s;
}

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--list] [--seed S] [--count K] [--iters R] [--json FILE] [ROWSxCOLS ...]\n",
               program);
  return 2;
}

// A ratio for the printed table, "-" where there is none (no cuDNN in the build).
std::string cell(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  int count = 48, iters = 0;  // 0: softmax::sweep_runs per shape, as the benchmark
  std::string json_path;
  bool list = false;
  std::vector<Shape> given;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw softmax::UsageError(a + " needs a value");
        return argv[++i];
      };
      if (a == "--seed") {
        seed = static_cast<uint64_t>(softmax::parse_int("--seed", value(), 0));
      } else if (a == "--count") {
        count = softmax::parse_int("--count", value(), 0);
      } else if (a == "--iters") {
        iters = softmax::parse_int("--iters", value(), softmax::kMinRuns);
      } else if (a == "--list") {
        list = true;
      } else if (a == "--json") {
        json_path = value();
      } else if (!a.empty() && a[0] == '-') {
        throw softmax::UsageError("unknown option '" + a + "'");
      } else {
        given.push_back(parse_shape(a));
      }
    }
  } catch (const softmax::UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return usage(argv[0]);
  }
  std::vector<Shape> shapes = draw(seed, count);
  shapes.insert(shapes.end(), given.begin(), given.end());
  if (shapes.empty()) {
    std::fprintf(stderr, "%s: no shapes (--count 0 and none given)\n", argv[0]);
    return usage(argv[0]);
  }
  if (list) {
    for (const Shape& s : shapes) std::printf("%dx%d\n", s.rows, s.cols);
    return 0;
  }
  if (!softmax::require_gpu(argv[0])) return softmax::kExitNoGpu;
  const softmax::DeviceInfo dev = softmax::query_device();
  std::printf("%s\n%s\n", dev.summary().c_str(), fastsoftmax::cluster_report().c_str());
  const softmax::Step* lesson = softmax::find_step("step08_cluster");
  const softmax::Step* library = &softmax::library();
  const bool with_cudnn = baselines::have_cudnn();

  struct Row {
    Shape shape;
    std::string plan, verified;
    double memcpy_us = 0, lesson_us = 0, library_us = 0;
    std::optional<double> cudnn_us;
  };
  std::vector<Row> rows;
  int failed = 0;
  try {
    size_t most = 0;
    for (const Shape& s : shapes) most = std::max(most, size_t(s.rows) * s.cols);
    softmax::TimingBuffers buf(most);
    softmax::Timer timer;
    std::printf("\n%9s %8s %9s %8s %8s %8s %8s %9s  %s\n", "M", "N", "memcpy us", "step08",
                "library", "cuDNN", "lib/cuDNN", "verified", "the library's path");
    for (const Shape& s : shapes) {
      Row r;
      r.shape = s;
      // The timing buffers lie on 16-byte boundaries, as library_plan assumes.
      const fastsoftmax::Plan plan = softmax::library_plan(s.rows, s.cols);
      r.plan = plan.path + ": " + plan.config;
      if (int64_t(s.rows) * s.cols <= kMaxVerified) {
        const softmax::VerifyResult v = softmax::check_step(
            *library, s.rows, s.cols, softmax::InputKind::kNormal, seed * 7919 + rows.size());
        r.verified = v.ok() ? "yes" : "FAILED";
        if (!v.ok()) {
          ++failed;
          std::printf("fastsoftmax %dx%d: %s\n", s.rows, s.cols, v.report().c_str());
        }
      } else {
        r.verified = "no";
      }
      const size_t n = size_t(s.rows) * s.cols;
      std::vector<softmax::Timer::Enqueue> e = {
          softmax::Timer::memcpy_enqueue(buf.y(), buf.x(), n * sizeof(float)),
          [&](cudaStream_t st) { lesson->launch(buf.x(), buf.y(), s.rows, s.cols, st); },
          [&](cudaStream_t st) { library->launch(buf.x(), buf.y(), s.rows, s.cols, st); }};
      if (with_cudnn)
        e.push_back([&](cudaStream_t st) {
          baselines::cudnn().launch(buf.x(), buf.y(), s.rows, s.cols, st);
        });
      const std::vector<softmax::Timing> t =
          timer.time_interleaved(e, iters > 0 ? iters : softmax::sweep_runs(s.rows, s.cols));
      r.memcpy_us = t[0].median_ms * 1e3;
      r.lesson_us = t[1].median_ms * 1e3;
      r.library_us = t[2].median_ms * 1e3;
      if (with_cudnn) r.cudnn_us = t[3].median_ms * 1e3;
      std::printf("%9d %8d %9.2f %8.3f %8.3f %8s %8s %9s  %s\n", s.rows, s.cols, r.memcpy_us,
                  r.memcpy_us / r.lesson_us, r.memcpy_us / r.library_us,
                  cell(r.cudnn_us ? r.memcpy_us / *r.cudnn_us : NAN).c_str(),
                  cell(r.cudnn_us ? *r.cudnn_us / r.library_us : NAN).c_str(),
                  r.verified.c_str(), r.plan.c_str());
      std::fflush(stdout);
      rows.push_back(r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  const std::string runs_text =
      iters > 0 ? std::to_string(iters) + " launches" : std::string(softmax::kSweepRunsRule);
  std::printf("\nratios: to a memcpy of the same bytes timed in the same rounds (median of %s); "
              "lib/cuDNN: cuDNN's median time over the library's (> 1: the library faster)\n",
              runs_text.c_str());
  if (failed > 0) {
    std::fprintf(stderr, "%s: %d shape(s) FAILED verification; no JSON written\n", argv[0],
                 failed);
    return 1;
  }
  if (json_path.empty()) return 0;

  softmax::JsonWriter j;
  j.begin_object();
  j.field("command", softmax::command_line(argc, argv));
  const char* commit = std::getenv("SOFTMAX_COMMIT");
  j.field("commit", commit != nullptr ? commit : "unknown");
  j.field("date", utc_date());
  j.begin_object("device")
      .field("name", dev.name)
      .field("sm_count", dev.sm_count)
      .field("driver", dev.kernel_driver)
      .field("runtime_cuda", dev.runtime_string())
      .end_object();
  j.field("cluster_fit", fastsoftmax::detail::cluster_fit_report());
  j.field("seed", static_cast<long long>(seed));
  j.field("drawn", count);
  j.field("iters", runs_text);
  j.field("cudnn", with_cudnn);
  j.begin_array("shapes");
  for (const Row& r : rows) {
    j.begin_object()
        .field("rows", r.shape.rows)
        .field("cols", r.shape.cols)
        .field("plan", r.plan)
        .field("verified", r.verified)
        .field("memcpy_us", r.memcpy_us)
        .field("step08_us", r.lesson_us)
        .field("fastsoftmax_us", r.library_us);
    if (r.cudnn_us) j.field("cudnn_us", *r.cudnn_us);
    j.end_object();
  }
  j.end_array();
  j.end_object();
  std::ofstream out(json_path);
  out << j.str() << "\n";
  if (!out) {
    std::fprintf(stderr, "%s: could not write %s\n", argv[0], json_path.c_str());
    return 1;
  }
  std::printf("wrote %s\n", json_path.c_str());
  return 0;
}
