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
  // The two kinds below put the value that matters at a row's ends, where a kernel that splits
  // a row into 16-byte slots has its partial head and tail slots (up to 3 elements each). Row r
  // uses column end_position(r, N): element 0, N-1, 1, N-2, 2, N-3 for r % 6 = 0..5 (clamped
  // to the row), so six consecutive rows cover every head and tail element.
  kMaxAtEnds,        // N(0,1), then the row's maximum planted at the end position: 4 above the
                     //   rest in rows with (r / 6) even (every element keeps a share), 100 above
                     //   in the others (the row is one-hot; a max that missed it overflows exp)
  kOneFiniteAtEnds,  // every element -inf except one finite value (uniform in [-80, 80]) at the
                     //   end position. torch.softmax gives exactly 1 there and 0 elsewhere
};

// Every kind, in declaration order (for tools that take a kind by name).
inline constexpr InputKind kAllInputKinds[] = {InputKind::kNormal,     InputKind::kHuge,
                                               InputKind::kLarge,      InputKind::kNonFinite,
                                               InputKind::kMaxAtEnds,  InputKind::kOneFiniteAtEnds};

// The column that kMaxAtEnds and kOneFiniteAtEnds single out in row `row` of a row of `cols`.
int end_position(int row, int cols);

// "normal", "huge", "large", "nonfinite", "max_at_ends", "one_finite_at_ends"
const char* to_string(InputKind kind);

// A fresh rows x cols matrix. The same (seed, kind, shape) always gives the same values; callers
// that want fresh values per check pass a new seed (next_seed()).
std::vector<float> make_input(int rows, int cols, uint64_t seed, InputKind kind = InputKind::kNormal);

// A process-wide counter mixed into a base seed, so every check draws new values while a run
// stays reproducible from its first seed.
uint64_t next_seed();

}  // namespace softmax
