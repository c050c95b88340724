// SPDX-License-Identifier: MIT
#include "common/data.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <random>

namespace softmax {

const char* to_string(InputKind kind) {
  switch (kind) {
    case InputKind::kNormal: return "normal";
    case InputKind::kHuge: return "huge";
    case InputKind::kLarge: return "large";
    case InputKind::kNonFinite: return "nonfinite";
    case InputKind::kMaxAtEnds: return "max_at_ends";
    case InputKind::kOneFiniteAtEnds: return "one_finite_at_ends";
  }
  return "?";
}

int end_position(int row, int cols) {
  const int k = row % 6;  // 0, N-1, 1, N-2, 2, N-3
  const int col = k % 2 == 0 ? k / 2 : cols - 1 - k / 2;
  return col < 0 ? 0 : (col >= cols ? cols - 1 : col);
}

uint64_t next_seed() {
  static std::atomic<uint64_t> counter{0};
  return 0x5eed0000ULL + counter.fetch_add(1);
}

std::vector<float> make_input(int rows, int cols, uint64_t seed, InputKind kind) {
  std::vector<float> x(static_cast<size_t>(rows) * cols);
  std::mt19937_64 rng(seed);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();

  if (kind == InputKind::kOneFiniteAtEnds) {
    std::uniform_real_distribution<float> finite(-80.f, 80.f);
    for (float& v : x) v = -inf;
    for (int r = 0; r < rows; ++r)
      x[static_cast<size_t>(r) * cols + end_position(r, cols)] = finite(rng);
    return x;
  }

  if (kind == InputKind::kHuge || kind == InputKind::kLarge) {
    const float bound = kind == InputKind::kHuge ? 1e30f : 80.f;
    std::uniform_real_distribution<float> uni(-bound, bound);
    for (float& v : x) v = uni(rng);
    return x;
  }

  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> col_of(0, cols - 1);
  std::uniform_real_distribution<float> magnitude(8.f, 16.f);
  for (float& v : x) v = normal(rng);
  // kMaxAtEnds plants its own peak below, over plain N(0,1) values: 4 above an outlier of 16 it
  // would leave every other element under exp(-20) of it, which tests float summation instead.
  if (kind != InputKind::kMaxAtEnds) {
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + static_cast<size_t>(r) * cols;
      for (int k = 0; k < 3; ++k) {
        const float m = magnitude(rng);
        row[col_of(rng)] = (k == 0 || (rng() & 1)) ? m : -m;  // at least one peak above the rest
      }
    }
  }

  if (kind == InputKind::kNonFinite) {
    // Row pattern, cycling every 6 rows: a few -inf entries; all -inf; one +inf; one NaN;
    // +inf and -inf together; an untouched row. Positions are random.
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + static_cast<size_t>(r) * cols;
      switch (r % 6) {
        case 0:
          for (int k = 0; k < 1 + cols / 4; ++k) row[col_of(rng)] = -inf;
          break;
        case 1:
          for (int c = 0; c < cols; ++c) row[c] = -inf;
          break;
        case 2: row[col_of(rng)] = inf; break;
        case 3: row[col_of(rng)] = nan; break;
        case 4:
          row[col_of(rng)] = -inf;
          row[col_of(rng)] = inf;
          break;
        default: break;
      }
    }
  }

  if (kind == InputKind::kMaxAtEnds) {
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + static_cast<size_t>(r) * cols;
      const int at = end_position(r, cols);
      float rest = -inf;  // the largest of the other elements (-inf in a row of one)
      for (int c = 0; c < cols; ++c)
        if (c != at && row[c] > rest) rest = row[c];
      const float above = (r / 6) % 2 == 0 ? 4.f : 100.f;
      row[at] = cols == 1 ? above : rest + above;
    }
  }
  return x;
}

}  // namespace softmax
