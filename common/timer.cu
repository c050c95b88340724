// SPDX-License-Identifier: MIT
#include "common/timer.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/cuda_check.h"

namespace softmax {

namespace {

// Reads the flush buffer so that L2 ends up holding its clean lines. The sum is written only if
// it hits an impossible value, which keeps the loads from being optimised away.
__global__ void read_buffer_kernel(const uint4* __restrict__ buf, size_t count, float* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = float(acc);
}

}  // namespace

double effective_gbps(int64_t rows, int64_t cols, double ms) {
  return 2.0 * double(rows) * double(cols) * sizeof(float) / (ms * 1e-3) / 1e9;
}

Timer::Timer(cudaStream_t stream) : stream_(stream) {
  int device = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  // Twice the L2 size, at least 64 MB, rounded to 16-byte vectors.
  const size_t bytes = std::max<size_t>(2 * size_t(l2), size_t(64) << 20) / 16 * 16;
  flush_ = DeviceBuffer<unsigned char>(bytes);
  sink_ = DeviceBuffer<float>(1);
  CUDA_CHECK(cudaEventCreate(&start_));
  CUDA_CHECK(cudaEventCreate(&stop_));
}

Timer::~Timer() {
  if (start_) cudaEventDestroy(start_);
  if (stop_) cudaEventDestroy(stop_);
}

void Timer::flush_l2() {
  // The write evicts whatever the previous launch left in L2; the read then replaces the flush's
  // own dirty lines with clean ones, so their write-back does not land inside the next timing.
  CUDA_CHECK(cudaMemsetAsync(flush_.get(), int(++flush_count_ & 0xff), flush_.size(), stream_));
  read_buffer_kernel<<<1024, 256, 0, stream_>>>(reinterpret_cast<const uint4*>(flush_.get()),
                                                flush_.size() / 16, sink_.get());
  CUDA_CHECK_LAUNCH();
}

Timing Timer::time(const Enqueue& enqueue, int runs) {
  return time_interleaved({enqueue}, runs).front();
}

std::vector<Timing> Timer::time_interleaved(const std::vector<Enqueue>& enqueues, int runs) {
  if (runs < 1) throw std::invalid_argument("Timer::time: runs must be >= 1");
  if (enqueues.empty()) throw std::invalid_argument("Timer::time_interleaved: nothing to time");
  const size_t n = enqueues.size();
  for (const Enqueue& enqueue : enqueues)
    for (int i = 0; i < kWarmupRuns; ++i) enqueue(stream_);
  CUDA_CHECK(cudaStreamSynchronize(stream_));

  std::vector<std::vector<float>> ms(n, std::vector<float>(runs));
  for (int i = 0; i < runs; ++i) {
    for (size_t k = 0; k < n; ++k) {
      const size_t j = (i + k) % n;  // round i starts with entry i mod n
      flush_l2();
      CUDA_CHECK(cudaEventRecord(start_, stream_));
      enqueues[j](stream_);
      CUDA_CHECK(cudaEventRecord(stop_, stream_));
      CUDA_CHECK(cudaEventSynchronize(stop_));
      CUDA_CHECK(cudaEventElapsedTime(&ms[j][i], start_, stop_));
    }
  }
  std::vector<Timing> out(n);
  for (size_t j = 0; j < n; ++j) {
    std::vector<float>& v = ms[j];
    std::sort(v.begin(), v.end());
    out[j].runs = runs;
    out[j].min_ms = v.front();
    out[j].median_ms = runs % 2 ? v[runs / 2] : 0.5 * (double(v[runs / 2 - 1]) + v[runs / 2]);
  }
  return out;
}

Timer::Enqueue Timer::memcpy_enqueue(void* dst, const void* src, size_t bytes) {
  return [=](cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  };
}

Timing Timer::time_memcpy(void* dst, const void* src, size_t bytes, int runs) {
  return time(memcpy_enqueue(dst, src, bytes), runs);
}

}  // namespace softmax
