// SPDX-License-Identifier: MIT
// THE STEP TABLE: every step, in order, then the library (fastsoftmax/), what the steps add up to.
// Tests, benchmark and tour iterate it.
//
// A step is a folder stepNN_topic/ whose softmax.cu defines `const softmax::Step& stepNN_topic::step()`
// (name, lesson, launcher, largest N, traffic model) plus one line below. Targets that include this
// header link every step's kernel library (CMake's `softmax_all_steps`).
#pragma once

#include <string>
#include <vector>

#include "common/softmax.h"
#include "fastsoftmax/softmax.h"

#define SOFTMAX_STEP_TABLE(X) \
  X(step00_naive)             \
  X(step01_online)            \
  X(step02_warp)              \
  X(step03_block)             \
  X(step04_smem)              \
  X(step05_vectorized)        \
  X(step06_warp_shuffle)      \
  X(step07_persistent)        \
  X(step08_cluster)

#define SOFTMAX_DECLARE_STEP(name) \
  namespace name {                 \
  const softmax::Step& step();     \
  }
SOFTMAX_STEP_TABLE(SOFTMAX_DECLARE_STEP)
#undef SOFTMAX_DECLARE_STEP

namespace softmax {

inline const std::vector<Step>& all_steps() {
#define SOFTMAX_STEP_ENTRY(name) name::step(),
  static const std::vector<Step> table = {SOFTMAX_STEP_TABLE(SOFTMAX_STEP_ENTRY)};
#undef SOFTMAX_STEP_ENTRY
  return table;
}

// The library, fastsoftmax::softmax, as a line of the table's kind, named "fastsoftmax"
// (common/library_step.cpp).
const Step& library();

// The library's plan for rows x cols in 16-byte aligned buffers, as cudaMalloc gives them and the
// harness and the benchmark time them (fastsoftmax::describe on a stand-in address).
fastsoftmax::Plan library_plan(int64_t rows, int64_t cols);

// Every step, then the library: what the tour, the benchmark and the GPU tests run.
inline const std::vector<Step>& all_implementations() {
  static const std::vector<Step> table = [] {
    std::vector<Step> t = all_steps();
    t.push_back(library());
    return t;
  }();
  return table;
}

// The step or library of the table named `name`, or nullptr.
inline const Step* find_step(const std::string& name) {
  for (const Step& s : all_implementations())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace softmax
