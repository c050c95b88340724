// SPDX-License-Identifier: MIT
// GPU timing shared by the step programs and the benchmark suite.
//
// Method: warm-up launches; then, before every timed launch, L2 is flushed (a write of twice the
// L2 size followed by a read of it, so the timed kernel starts with a cold L2 holding no dirty
// lines of the flush); CUDA events recorded on the stream around the launch alone; the median and
// the minimum over the runs. A kernel and the memcpy it is compared with are timed interleaved,
// launch by launch (time_interleaved), never minutes apart.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "common/device_buffer.h"

namespace softmax {

inline constexpr int kDefaultRuns = 50;
inline constexpr int kMinRuns = 20;
inline constexpr int kWarmupRuns = 3;

// The benchmark's and the shape scan's rule: 30 timed runs, and 200 where the shape moves at most
// 64 MiB (2*M*N*4 bytes), a kernel of 25 us or less at the memcpy's speed. Such a kernel varies by
// a few percent from launch to launch, in steps of the event timer's 32 ns (half a percent at
// 6 us), and over 30 runs the medians of two kernels within 1% of each other changed order from
// process to process (docs/notes/tuning.md, "Timed runs"). The L2 flush before each launch, not
// the kernel, sets the cost of a run at these sizes (about 0.1 ms).
inline constexpr int kSweepRuns = 30;
inline constexpr int kShortShapeRuns = 200;
inline constexpr long long kShortShapeBytes = 64LL << 20;
inline constexpr const char* kSweepRunsRule = "200 launches where 2·M·N·4 ≤ 64 MiB, 30 above";
inline constexpr int sweep_runs(long long rows, long long cols) {
  return 2 * rows * cols * 4 <= kShortShapeBytes ? kShortShapeRuns : kSweepRuns;
}

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
};

// Effective bandwidth of a softmax (or copy) of rows x cols floats: one read and one write of
// every element, 2*M*N*4 bytes, over the time. The yardstick every step is compared by.
double effective_gbps(int64_t rows, int64_t cols, double ms);

class Timer {
 public:
  explicit Timer(cudaStream_t stream = 0);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  using Enqueue = std::function<void(cudaStream_t)>;

  // Times `enqueue(stream)`, which must only enqueue work on the stream.
  Timing time(const Enqueue& enqueue, int runs = kDefaultRuns);

  // Times several launches side by side: each round times every one of them once, in an order
  // that rotates from round to round, so clock and temperature drift over the measurement reach
  // all of them alike and a ratio of two medians compares like with like. One Timing per entry.
  std::vector<Timing> time_interleaved(const std::vector<Enqueue>& enqueues,
                                       int runs = kDefaultRuns);

  // A device-to-device cudaMemcpyAsync of `bytes`, timed the same way: the ceiling to compare by.
  Timing time_memcpy(void* dst, const void* src, size_t bytes, int runs = kDefaultRuns);
  // The same copy as something to enqueue, for time_interleaved.
  static Enqueue memcpy_enqueue(void* dst, const void* src, size_t bytes);

  // Evicts L2 (enqueued on the stream). Public so profiling tools can use the same flush.
  void flush_l2();

 private:
  cudaStream_t stream_;
  DeviceBuffer<unsigned char> flush_;
  DeviceBuffer<float> sink_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  unsigned flush_count_ = 0;
};

}  // namespace softmax
