// SPDX-License-Identifier: MIT
// The consumer's one test: a softmax through the installed library, checked on the host.
// Exit codes: 0 verified, 1 wrong or failed, 77 no GPU (CTest reports it as skipped).
#include <fastsoftmax/softmax.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "consumer: no CUDA device; nothing to run (exit code 77: skipped)\n");
    return 77;
  }
  // Rows of an odd length, so the row starts fall off 16-byte boundaries.
  const int rows = 333, cols = 4099;
  std::vector<float> x(size_t(rows) * cols), y(x.size(), -1.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 2654435761u) % 2001) / 100.f - 10.f;

  float *dx = nullptr, *dy = nullptr;
  const size_t bytes = x.size() * sizeof(float);
  if (cudaMalloc(&dx, bytes) != cudaSuccess || cudaMalloc(&dy, bytes) != cudaSuccess)
    return fail("cudaMalloc failed");
  cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemset(dy, 0, bytes);

  const fastsoftmax::Plan plan = fastsoftmax::describe(dx, dy, rows, cols);
  std::printf("fastsoftmax %s: %dx%d takes path '%s' (%s): %s\n", FASTSOFTMAX_VERSION, rows, cols,
              plan.path.c_str(), plan.config.c_str(), plan.why.c_str());
  try {
    fastsoftmax::softmax(dx, dy, rows, cols);
  } catch (const fastsoftmax::Error& e) {
    return fail(e.what());
  }
  if (cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    return fail("the softmax or the copy back failed");

  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r) * cols];
    double max = xr[0], sum = 0;
    for (int c = 0; c < cols; ++c) max = std::fmax(max, xr[c]);
    for (int c = 0; c < cols; ++c) sum += std::exp(double(xr[c]) - max);
    for (int c = 0; c < cols; ++c) {
      const double ref = std::exp(double(xr[c]) - max) / sum;
      const double err = std::fabs(y[size_t(r) * cols + c] - ref);
      if (!(err <= 1e-7 + 1e-5 * ref)) {
        std::fprintf(stderr, "consumer: y[%d][%d] = %.9g, expected %.9g\n", r, c,
                     y[size_t(r) * cols + c], ref);
        return 1;
      }
      worst = std::fmax(worst, err);
    }
  }

  // A bad argument is refused before anything is written.
  bool refused = false;
  try {
    fastsoftmax::softmax(nullptr, dy, rows, cols);
  } catch (const fastsoftmax::Error& e) {
    refused = e.kind() == fastsoftmax::Error::Kind::kInvalidArgument;
  }
  if (!refused) return fail("a null x was not refused with kInvalidArgument");

  cudaFree(dx);
  cudaFree(dy);
  std::printf("consumer: %dx%d verified against a double-precision reference (max error %.2e)\n",
              rows, cols, worst);
  return 0;
}
