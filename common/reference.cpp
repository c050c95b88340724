// SPDX-License-Identifier: MIT
#include "common/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <functional>
#include <thread>

namespace softmax {
namespace {

// Rows [first, last) of the reference.
void reference_rows(const std::vector<float>& x, int cols, int first, int last,
                    std::vector<double>& ref) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int r = first; r < last; ++r) {
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
}

}  // namespace

// Large matrices are split by rows over the host's cores: the tests verify matrices of up to
// ~10^8 elements for every step, and one core's exp() in double would dominate their time.
std::vector<double> reference_softmax(const std::vector<float>& x, int rows, int cols) {
  std::vector<double> ref(x.size());
  constexpr size_t kPerThread = size_t(1) << 20;  // elements below which a thread is not worth it
  const size_t want = std::max<size_t>(1, x.size() / kPerThread);
  const int threads = static_cast<int>(std::min<size_t>(
      {want, size_t(std::max(1u, std::thread::hardware_concurrency())), size_t(8), size_t(rows)}));
  if (threads <= 1) {
    reference_rows(x, cols, 0, rows, ref);
    return ref;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const int first = static_cast<int>(int64_t(rows) * t / threads);
    const int last = static_cast<int>(int64_t(rows) * (t + 1) / threads);
    pool.emplace_back(reference_rows, std::cref(x), cols, first, last, std::ref(ref));
  }
  for (std::thread& th : pool) th.join();
  return ref;
}

}  // namespace softmax
