// SPDX-License-Identifier: MIT
// fastsoftmax: how describe() sees a plan. It runs the very dispatch that softmax() runs, with
// every kernel launch replaced by a record, so the plan it reports cannot drift from what a call
// does. The dispatch notes its choice where it makes it (note: the path and the rule), the
// launcher names the kernel it sizes (name_kernel), and the launch site records the geometry and
// returns without launching (recorded).
#pragma once

#include <cstdint>
#include <string>

#include "fastsoftmax/softmax.h"

namespace fastsoftmax::detail {

// The plan being filled on this thread, or null while softmax() runs for real.
inline Plan*& recording() {
  thread_local Plan* plan = nullptr;
  return plan;
}

inline void note(const char* path, const char* why) {
  if (Plan* p = recording()) {
    p->path = path;
    p->why = why;
  }
}

// Callers test recording() first, so that a real launch builds no strings.
inline void name_kernel(const std::string& what) {
  if (Plan* p = recording()) p->config = what;
}

// At a launch site: true while describing (the geometry is added to the plan and the caller
// must return without launching), false otherwise.
inline bool recorded(int64_t blocks, int threads, size_t smem_bytes = 0) {
  Plan* p = recording();
  if (p == nullptr) return false;
  if (!p->config.empty()) p->config += ", ";
  p->config += std::to_string(blocks) + " blocks of " + std::to_string(threads) + " threads";
  if (smem_bytes > 0) p->config += ", " + std::to_string(smem_bytes) + " B dynamic shared memory";
  return true;
}

}  // namespace fastsoftmax::detail
