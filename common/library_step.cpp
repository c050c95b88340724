// SPDX-License-Identifier: MIT
// The library (fastsoftmax/) as a line of the step table's kind: the harness, the tests, the
// benchmark and the tour run it as they run the steps, under the name "fastsoftmax".
#include <stdexcept>

#include "common/cuda_check.h"
#include "common/step_table.h"
#include "fastsoftmax/softmax.h"

namespace softmax {
namespace {

// The harness's contract (common/softmax.h): bad arguments throw std::invalid_argument, CUDA
// failures softmax::CudaError. The library's own Error says which it is.
void launch(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  check_launch_args("fastsoftmax", x, y, rows, cols, kNoColLimit);
  try {
    fastsoftmax::softmax(x, y, rows, cols, stream);
  } catch (const fastsoftmax::Error& e) {
    if (e.kind() == fastsoftmax::Error::Kind::kInvalidArgument) throw std::invalid_argument(e.what());
    throw CudaError(e.cuda_error(), e.what());
  }
}

int max_cols() { return kNoColLimit; }

// One read and one write an element, but where the library's plan reads a row twice: the plan
// for one row of this length.
Traffic traffic(int cols) {
  const std::string path = library_plan(1, cols).path;
  if (path == "two_pass" || path == "two_pass_scalar") return {2, 1, 0, 0};
  return {1, 1, 0, 0};
}

}  // namespace

fastsoftmax::Plan library_plan(int64_t rows, int64_t cols) {
  const auto* aligned = reinterpret_cast<const float*>(uintptr_t(1) << 20);  // never touched
  return fastsoftmax::describe(aligned, aligned, rows, cols);
}

const Step& library() {
  static const Step s{"fastsoftmax", "the library: every path the tuning found, one call", launch,
                      max_cols, traffic};
  return s;
}

}  // namespace softmax
