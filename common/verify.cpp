// SPDX-License-Identifier: MIT
#include "common/verify.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "common/reference.h"

namespace softmax {

namespace {
constexpr size_t kMaxReported = 8;
constexpr size_t kGuardFloats = 64;  // poisoned floats before and after the output
}  // namespace

bool is_poison(float v) {
  unsigned char bytes[sizeof(float)];
  std::memcpy(bytes, &v, sizeof v);
  for (unsigned char b : bytes)
    if (b != kPoisonByte) return false;
  return true;
}

VerifyResult verify(const std::vector<float>& y, const std::vector<double>& ref, int rows,
                    int cols) {
  VerifyResult res;
  res.elements = static_cast<int64_t>(rows) * cols;
  for (int r = 0; r < rows; ++r) {
    const size_t base = static_cast<size_t>(r) * cols;
    bool row_finite = true;
    double row_sum = 0;
    for (int c = 0; c < cols; ++c) {
      const float got = y[base + c];
      const double want = ref[base + c];
      bool bad;
      if (std::isnan(want)) {
        row_finite = false;
        bad = !std::isnan(got);
      } else {
        const double err = std::fabs(static_cast<double>(got) - want);
        bad = !(err <= kAtol + kRtol * std::fabs(want));  // a NaN `got` fails here too
        if (std::isfinite(err)) {
          if (err > res.max_abs_err) res.max_abs_err = err;
          if (want != 0 && err / std::fabs(want) > res.max_rel_err)
            res.max_rel_err = err / std::fabs(want);
        }
        row_sum += got;
      }
      if (bad) {
        ++res.bad_elements;
        if (is_poison(got)) ++res.unwritten;
        if (res.first.size() < kMaxReported) res.first.push_back({r, c, got, want});
      }
    }
    if (row_finite) {
      const double sum_err = std::fabs(row_sum - 1.0);
      if (!(sum_err <= kRowSumTol)) ++res.bad_rows;
      if (std::isfinite(sum_err) && sum_err > res.max_row_sum_err) res.max_row_sum_err = sum_err;
    }
  }
  return res;
}

std::string VerifyResult::report() const {
  std::ostringstream out;
  out.precision(3);
  out << (ok() ? "PASS" : "FAIL") << ": " << elements << " elements, max abs err " << max_abs_err
      << ", max rel err " << max_rel_err << ", max |row sum - 1| " << max_row_sum_err;
  if (ok()) return out.str();
  out << "\n  " << bad_elements << " elements out of tolerance (" << unwritten
      << " never written), " << bad_rows << " rows whose sum is off by more than " << kRowSumTol
      << ", " << guard_writes << " writes outside the output";
  out.precision(9);
  for (const Mismatch& m : first)
    out << "\n  (row " << m.row << ", col " << m.col << "): got " << m.got << ", expected "
        << m.expected << (is_poison(m.got) ? "  [never written]" : "");
  if (static_cast<int64_t>(first.size()) < bad_elements)
    out << "\n  ... and " << bad_elements - static_cast<int64_t>(first.size()) << " more";
  return out.str();
}

VerifyResult check_step(const Step& step, int rows, int cols, InputKind kind, uint64_t seed,
                        Placement placement) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> x = make_input(rows, cols, seed, kind);

  DeviceBuffer<float> d_x(n + placement.x_offset);
  DeviceBuffer<float> d_y(n + placement.y_offset + 2 * kGuardFloats);
  float* x_ptr = d_x.get() + placement.x_offset;
  float* y_ptr = d_y.get() + placement.y_offset + kGuardFloats;
  CUDA_CHECK(cudaMemcpy(x_ptr, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_y.get(), kPoisonByte, d_y.size() * sizeof(float)));

  step.launch(x_ptr, y_ptr, rows, cols, /*stream=*/0);
  CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> all(d_y.size());
  CUDA_CHECK(cudaMemcpy(all.data(), d_y.get(), all.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const size_t first = placement.y_offset + kGuardFloats;
  std::vector<float> y(all.begin() + first, all.begin() + first + n);

  VerifyResult res = verify(y, reference_softmax(x, rows, cols), rows, cols);
  for (size_t i = 0; i < all.size(); ++i)
    if ((i < first || i >= first + n) && !is_poison(all[i])) ++res.guard_writes;
  return res;
}

}  // namespace softmax
