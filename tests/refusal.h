// SPDX-License-Identifier: MIT
// The library tests' check of a refused call: the message of the fastsoftmax::Error of kind
// kInvalidArgument that `call` throws, or "" if it throws none.
#pragma once

#include <string>

#include "fastsoftmax/softmax.h"

namespace softmax::testing {

template <typename F>
std::string refusal(F&& call) {
  try {
    call();
  } catch (const fastsoftmax::Error& e) {
    if (e.kind() == fastsoftmax::Error::Kind::kInvalidArgument) return e.what();
    return std::string("unexpected CUDA error: ") + e.what();
  }
  return "";
}

}  // namespace softmax::testing
