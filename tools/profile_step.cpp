// SPDX-License-Identifier: MIT
// softmax_profile STEP ROWS COLS [X_OFFSET Y_OFFSET [KIND]]: one launch of one step (or baseline)
// on fresh input, nothing else on the GPU, for profilers: `ncu --metrics dram__bytes_read.sum ...
// softmax_profile ...` sees exactly the step's kernels. Also used by the sanitizer script.
// Verifies the result. X_OFFSET and Y_OFFSET (floats, 0..3, default 0) place x and y that far past
// a 256-byte aligned allocation, so rows start off 16-byte boundaries; KIND is an input kind
// (default normal).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "baselines/baselines.h"
#include "common/cli.h"
#include "common/data.h"
#include "common/device.h"
#include "common/step_table.h"
#include "common/verify.h"

namespace {

std::string kind_names() {
  std::string names;
  for (softmax::InputKind k : softmax::kAllInputKinds)
    names += std::string(names.empty() ? "" : ", ") + softmax::to_string(k);
  return names;
}

void usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s STEP ROWS COLS [X_OFFSET Y_OFFSET [KIND]]\n"
               "  STEP      a step name, unfused or cudnn\n"
               "  X_OFFSET Y_OFFSET  floats (0..3) past a 256-byte aligned allocation; default 0 0\n"
               "  KIND      input kind: %s (default normal)\n",
               program, kind_names().c_str());
}

// An offset of 0..3 floats, or -1.
int parse_offset(const char* text) {
  const std::string s = text;
  return s.size() == 1 && s[0] >= '0' && s[0] <= '3' ? s[0] - '0' : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6 && argc != 7) {
    usage(argv[0]);
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
  softmax::Placement placement;
  if (argc >= 6) {
    placement.x_offset = parse_offset(argv[4]);
    placement.y_offset = parse_offset(argv[5]);
    if (placement.x_offset < 0 || placement.y_offset < 0) {
      std::fprintf(stderr, "%s: offsets must be 0, 1, 2 or 3 floats (got '%s' '%s')\n", argv[0],
                   argv[4], argv[5]);
      return 2;
    }
  }
  softmax::InputKind kind = softmax::InputKind::kNormal;
  if (argc == 7) {
    bool found = false;
    for (softmax::InputKind k : softmax::kAllInputKinds)
      if (std::string(argv[6]) == softmax::to_string(k)) kind = k, found = true;
    if (!found) {
      std::fprintf(stderr, "%s: no input kind named '%s' (kinds: %s)\n", argv[0], argv[6],
                   kind_names().c_str());
      return 2;
    }
  }
  std::vector<softmax::Step> all = softmax::all_implementations();
  for (const softmax::Step& s : baselines::all()) all.push_back(s);
  const softmax::Step* step = nullptr;
  for (const softmax::Step& s : all)
    if (name == s.name) step = &s;
  if (step == nullptr) {
    std::fprintf(stderr, "%s: no step or baseline named '%s'\n", argv[0], name.c_str());
    return 2;
  }
  if (!softmax::require_gpu(argv[0])) return softmax::kExitNoGpu;
  try {
    const softmax::Traffic t = step->traffic(cols);
    std::printf("model_read_bytes=%.0f model_write_bytes=%.0f\n", t.read_bytes(rows, cols),
                t.write_bytes(rows, cols));
    const softmax::VerifyResult r =
        softmax::check_step(*step, rows, cols, kind, softmax::next_seed(), placement);
    // "STEP ROWSxCOLS: PASS ..." (tools/dram_traffic.py reads it); offsets and kind, when given,
    // between the shape and the colon.
    std::string what = step->name + (" " + std::to_string(rows)) + "x" + std::to_string(cols);
    if (argc >= 6)
      what += " x+" + std::to_string(placement.x_offset) + " y+" +
              std::to_string(placement.y_offset) + " " + softmax::to_string(kind);
    std::printf("%s: %s\n", what.c_str(), r.report().c_str());
    return r.ok() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
