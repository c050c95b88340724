// SPDX-License-Identifier: MIT
// The step programs' main flow (device info, verification, bandwidth sweep, JSON), and the
// measurement helpers the benchmark suite shares with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "common/softmax.h"
#include "common/timer.h"

namespace softmax {

// One step program: `stepNN_topic [options]`. Returns the process exit code.
int step_main(int argc, char** argv, const Step& step);

// The tour: every step in table order, each as its own program would run, then a summary.
int tour_main(int argc, char** argv, const std::vector<Step>& steps);

// The command as run, argv joined by spaces: the "command" the programs' JSON records.
std::string command_line(int argc, char** argv);

// Device buffers for timing: x filled once with normal-with-outliers values (timing does not
// depend on the values, and drawing 67M fresh values per shape would dominate the run).
class TimingBuffers {
 public:
  explicit TimingBuffers(size_t max_elements);
  float* x() const { return x_.get(); }
  float* y() const { return y_.get(); }
  size_t capacity() const { return x_.size(); }

 private:
  DeviceBuffer<float> x_, y_;
};

struct Measurement {
  int rows = 0, cols = 0;
  Timing kernel, memcpy;
  double gbps = 0;         // effective: 2*M*N*4 / median kernel time
  double memcpy_gbps = 0;  // the same formula for the memcpy of 4*M*N bytes
  double ratio = 0;        // gbps / memcpy_gbps
  double model_bytes = 0;  // the step's traffic model at this shape
  Timing rival;            // the rival's timing, when one was given (else runs == 0)
  double rival_speedup = 0;  // this step's median time / the rival's: > 1 when the rival is faster
};

// Times step and a memcpy of the same bytes at rows x cols, interleaved launch by launch, so the
// ratio compares the two under the same conditions (launch errors throw). With a rival, that
// step is timed in the same rounds too: a head-to-head comparison free of drift.
Measurement measure(const Step& step, Timer& timer, const TimingBuffers& buf, int rows, int cols,
                    int iters, const Step* rival = nullptr);

}  // namespace softmax
