// SPDX-License-Identifier: MIT
// Host-side inputs: seeded, normally distributed, with planted outliers so rows are not
// near-uniform (a near-uniform row hides a wrong max or a wrong normaliser).
#pragma once

#include <cstdint>
#include <vector>

namespace softmax {

enum class InputKind {
  kNormal,       // N(0,1) plus 3 outliers per row of magnitude 8..16: one positive, two either sign
  kHuge,         // uniform in [-1e30, 1e30]: any exp() taken before subtracting the max overflows
  kLarge,        // uniform in [-80, 80]: exp(80) overflows float, exp(x - max) must not
  kNonFinite,    // kNormal with -inf, +inf and NaN planted in chosen rows (see make_input)
};

const char* to_string(InputKind kind);

// A fresh rows x cols matrix. The same (seed, kind, shape) always gives the same values; callers
// that want fresh values per check pass a new seed (next_seed()).
std::vector<float> make_input(int rows, int cols, uint64_t seed, InputKind kind = InputKind::kNormal);

// A process-wide counter mixed into a base seed, so every check draws new values while a run
// stays reproducible from its first seed.
uint64_t next_seed();

}  // namespace softmax
