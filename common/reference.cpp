// SPDX-License-Identifier: MIT
#include "common/reference.h"

#include <cmath>
#include <limits>

namespace softmax {

std::vector<double> reference_softmax(const std::vector<float>& x, int rows, int cols) {
  std::vector<double> ref(x.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int r = 0; r < rows; ++r) {
    const float* in = x.data() + static_cast<size_t>(r) * cols;
    double* out = ref.data() + static_cast<size_t>(r) * cols;

    // std::max would silently drop a NaN; track it explicitly.
    bool has_nan = false;
    double max_val = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < cols; ++c) {
      if (std::isnan(in[c])) has_nan = true;
      else if (in[c] > max_val) max_val = in[c];
    }
    // +inf max: inf - inf is NaN. -inf max: every entry is -inf, and -inf - -inf is NaN.
    if (has_nan || !std::isfinite(max_val)) {
      for (int c = 0; c < cols; ++c) out[c] = nan;
      continue;
    }
    double sum = 0;
    for (int c = 0; c < cols; ++c) {
      out[c] = std::exp(static_cast<double>(in[c]) - max_val);
      sum += out[c];
    }
    for (int c = 0; c < cols; ++c) out[c] /= sum;
  }
  return ref;
}

}  // namespace softmax
