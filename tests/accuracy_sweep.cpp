// SPDX-License-Identifier: MIT
// softmax_accuracy STEP COLS... [--rows R]: how far one step's output lies from the
// double-precision reference as rows grow longer.
//
// For each N: R fresh rows of N columns of normal input with planted outliers (as every check
// draws), one launch, and the harness's own verification (common/verify.h). One line per N: the
// largest absolute error, the largest relative error |y - ref| / |ref| over the elements whose
// reference is not zero (with this input that is all of them, none near float's underflow: the
// smallest, a -16 outlier under a +16 peak, is exp(-32) / row sum, about 1.3e-14 / row sum),
// the largest |row sum - 1|, and whether everything is within the tolerance the tests apply:
// |y - ref| <= 1e-8 + 1e-5*|ref| per element and |row sum - 1| <= 1e-5 per row.
//
// Example: build/tests/softmax_accuracy step02_warp 1000 10000 100000 300007 1000000 --rows 4
// Exit codes: 0 every N within tolerance, 1 some N out of it or a CUDA failure, 2 bad arguments,
// 77 no CUDA device.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/data.h"
#include "common/device.h"
#include "common/step_table.h"
#include "common/verify.h"

namespace {

constexpr int kDefaultRows = 4;

void usage(const char* program) {
  std::string names;
  for (const softmax::Step& s : softmax::all_implementations())
    names += std::string(names.empty() ? "" : ", ") + s.name;
  std::fprintf(stderr,
               "usage: %s STEP COLS... [--rows R]\n"
               "  STEP      one of: %s\n"
               "  COLS      one or more row lengths N\n"
               "  --rows R  rows per N (default %d)\n"
               "Prints, per N, the max absolute and relative error against the double-precision\n"
               "reference, the max |row sum - 1|, and whether all are within tolerance.\n"
               "exit codes: 0 all within tolerance, 1 some not (or a CUDA failure), 2 bad "
               "arguments, 77 no CUDA device\n",
               program, names.c_str(), kDefaultRows);
}

}  // namespace

int main(int argc, char** argv) {
  const char* program = argv[0];
  const softmax::Step* step = nullptr;
  int rows = kDefaultRows;
  std::vector<int> cols_list;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "-h" || arg == "--help") {
        usage(program);
        return 0;
      }
      if (arg == "--rows") {
        if (i + 1 >= argc) throw softmax::UsageError("--rows needs a value");
        const char* args[] = {program, "--rows", argv[++i]};
        rows = softmax::parse_args(3, args).rows;
      } else if (step == nullptr) {
        step = softmax::find_step(arg);
        if (step == nullptr) throw softmax::UsageError("no step named '" + arg + "'");
      } else {
        // The harness's own integer check; its messages name the option, here --cols.
        const char* args[] = {program, "--cols", argv[i]};
        cols_list.push_back(softmax::parse_args(3, args).cols);
      }
    }
    if (step == nullptr || cols_list.empty()) throw softmax::UsageError("need a STEP and a COLS");
  } catch (const softmax::UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    usage(program);
    return 2;
  }

  if (!softmax::require_gpu(program)) return softmax::kExitNoGpu;
  try {
    const int limit = step->max_cols();
    std::printf("%s on %s, %d rows of normal input per N\n", step->name,
                softmax::query_device().name.c_str(), rows);
    std::printf(
        "rel err: over elements with a nonzero reference; tolerance: |y - ref| <= %g + "
        "%g*|ref|, |row sum - 1| <= %g\n",
        softmax::kAtol, softmax::kRtol, softmax::kRowSumTol);
    std::printf("%10s  %12s  %12s  %12s  %s\n", "N", "max abs err", "max rel err", "max |sum-1|",
                "within tolerance");
    bool all_ok = true;
    for (int cols : cols_list) {
      if (cols > limit) {
        std::printf("%10d  past the step's limit of %d columns on this device: not run\n", cols,
                    limit);
        continue;
      }
      const softmax::VerifyResult r =
          softmax::check_step(*step, rows, cols, softmax::InputKind::kNormal, softmax::next_seed());
      std::printf("%10d  %12.3e  %12.3e  %12.3e  %s\n", cols, r.max_abs_err, r.max_rel_err,
                  r.max_row_sum_err, r.ok() ? "yes" : "NO");
      std::fflush(stdout);
      all_ok = all_ok && r.ok();
    }
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}
