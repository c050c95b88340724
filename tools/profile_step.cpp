// SPDX-License-Identifier: MIT
// softmax_profile STEP ROWS COLS: one launch of one step (or baseline) on fresh input, nothing
// else on the GPU, for profilers: `ncu --metrics dram__bytes_read.sum ... softmax_profile ...`
// sees exactly the step's kernels. Also used by the sanitizer script. Verifies the result.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "baselines/baselines.h"
#include "common/cli.h"
#include "common/device.h"
#include "common/step_table.h"
#include "common/verify.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s STEP ROWS COLS   (STEP: a step name, unfused or cudnn)\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  int rows = 0, cols = 0;
  try {
    const char* args[] = {argv[0], "--rows", argv[2], "--cols", argv[3]};
    const softmax::Options opt = softmax::parse_args(5, args);
    rows = opt.rows;
    cols = opt.cols;
  } catch (const softmax::UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  std::vector<softmax::Step> all = softmax::all_steps();
  for (const softmax::Step& s : baselines::all()) all.push_back(s);
  const softmax::Step* step = nullptr;
  for (const softmax::Step& s : all)
    if (name == s.name) step = &s;
  if (step == nullptr) {
    std::fprintf(stderr, "%s: no step or baseline named '%s'\n", argv[0], name.c_str());
    return 2;
  }
  std::string why;
  if (!softmax::gpu_available(&why)) {
    std::fprintf(stderr, "%s: %s\n", argv[0], why.c_str());
    return softmax::kExitNoGpu;
  }
  try {
    const softmax::Traffic t = step->traffic(cols);
    std::printf("model_read_bytes=%.0f model_write_bytes=%.0f\n", t.read_bytes(rows, cols),
                t.write_bytes(rows, cols));
    const softmax::VerifyResult r =
        softmax::check_step(*step, rows, cols, softmax::InputKind::kNormal, softmax::next_seed());
    std::printf("%s %dx%d: %s\n", step->name, rows, cols, r.report().c_str());
    return r.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
