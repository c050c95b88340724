// SPDX-License-Identifier: MIT
// The CPU reference on hand-computed cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/data.h"
#include "common/reference.h"

namespace softmax {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Reference, UniformRowGivesOneOverN) {
  for (int n : {1, 2, 7, 1000}) {
    const std::vector<float> x(n, 3.25f);
    for (double v : reference_softmax(x, 1, n)) EXPECT_DOUBLE_EQ(v, 1.0 / n);
  }
}

TEST(Reference, HandComputedRow) {
  // exp(x) = 1, 2, 3: the softmax is 1/6, 2/6, 3/6.
  const std::vector<float> x = {0.f, std::log(2.f), std::log(3.f)};
  const std::vector<double> y = reference_softmax(x, 1, 3);
  EXPECT_NEAR(y[0], 1.0 / 6, 1e-7);
  EXPECT_NEAR(y[1], 2.0 / 6, 1e-7);
  EXPECT_NEAR(y[2], 3.0 / 6, 1e-7);
}

TEST(Reference, RowsAreIndependent) {
  const std::vector<float> x = {1.f, 1.f, 0.f, 50.f};
  const std::vector<double> y = reference_softmax(x, 2, 2);
  EXPECT_DOUBLE_EQ(y[0], 0.5);
  EXPECT_DOUBLE_EQ(y[1], 0.5);
  EXPECT_NEAR(y[2], std::exp(-50.0), 1e-30);
  EXPECT_NEAR(y[3], 1.0, 1e-15);
}

TEST(Reference, ShiftInvariant) {
  const std::vector<float> x = {-1.5f, 0.25f, 2.f, 0.f, 3.5f};
  std::vector<float> shifted = x;
  for (float& v : shifted) v += 64.f;  // exactly representable: the same row, moved
  const std::vector<double> a = reference_softmax(x, 1, 5), b = reference_softmax(shifted, 1, 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(a[i], b[i], 1e-15);
}

TEST(Reference, OneHugeValueTakesEverything) {
  const std::vector<float> x = {0.f, 1e30f, -5.f, 3.f};
  const std::vector<double> y = reference_softmax(x, 1, 4);
  EXPECT_EQ(y[1], 1.0);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[2], 0.0);
  EXPECT_EQ(y[3], 0.0);
}

TEST(Reference, NegativeInfinityGivesZero) {
  const std::vector<float> x = {-kInf, 0.f, -kInf, 0.f};
  const std::vector<double> y = reference_softmax(x, 1, 4);
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[2], 0.0);
  EXPECT_DOUBLE_EQ(y[1], 0.5);
  EXPECT_DOUBLE_EQ(y[3], 0.5);
}

TEST(Reference, AllNegativeInfinityRowIsNaN) {
  const std::vector<float> x = {-kInf, -kInf, -kInf, 1.f, 2.f, 3.f};
  const std::vector<double> y = reference_softmax(x, 2, 3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isnan(y[i])) << i;  // the next row is untouched
}

TEST(Reference, PositiveInfinityMakesRowNaN) {
  const std::vector<float> x = {1.f, kInf, 2.f};
  for (double v : reference_softmax(x, 1, 3)) EXPECT_TRUE(std::isnan(v));
}

TEST(Reference, NaNMakesRowNaN) {
  for (int pos = 0; pos < 3; ++pos) {  // first, middle, last: a max that skips NaN would miss some
    std::vector<float> x = {1.f, 2.f, 3.f};
    x[pos] = kNaN;
    for (double v : reference_softmax(x, 1, 3)) EXPECT_TRUE(std::isnan(v)) << "NaN at " << pos;
  }
}

// torch.softmax on a row whose only finite entry is v: exp(v - v) = 1 there, exp(-inf - v) = 0
// everywhere else, exactly. The row is not NaN: its max is finite.
TEST(Reference, OneFiniteValueGivesExactlyOneHot) {
  for (float v : {0.f, -75.5f, 80.f, 1e30f, -1e30f}) {
    for (int pos = 0; pos < 5; ++pos) {
      std::vector<float> x(5, -kInf);
      x[pos] = v;
      const std::vector<double> y = reference_softmax(x, 1, 5);
      for (int c = 0; c < 5; ++c) EXPECT_EQ(y[c], c == pos ? 1.0 : 0.0) << v << " at " << pos;
    }
  }
}

TEST(Reference, OneFiniteAtEndsRowsAreOneHotAtTheEnd) {
  for (int cols : {1, 2, 3, 5, 7, 64, 1031}) {
    const int rows = 24;
    const std::vector<float> x = make_input(rows, cols, 11, InputKind::kOneFiniteAtEnds);
    const std::vector<double> y = reference_softmax(x, rows, cols);
    for (int r = 0; r < rows; ++r) {
      const int at = end_position(r, cols);
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(y[size_t(r) * cols + c], c == at ? 1.0 : 0.0)
            << "row " << r << " col " << c << " of " << cols;
    }
  }
}

// The planted maximum takes the largest share; 100 above the rest it takes all of it (the
// others, exp(-100) and less, are zero within the tolerance).
TEST(Reference, MaxAtEndsRowsPeakAtTheEnd) {
  for (int cols : {1, 2, 3, 6, 61, 1031}) {
    const int rows = 24;
    const std::vector<float> x = make_input(rows, cols, 12, InputKind::kMaxAtEnds);
    const std::vector<double> y = reference_softmax(x, rows, cols);
    for (int r = 0; r < rows; ++r) {
      const double* row = y.data() + size_t(r) * cols;
      const int at = end_position(r, cols);
      EXPECT_EQ(std::max_element(row, row + cols) - row, at) << "row " << r << " of " << cols;
      double sum = 0;
      for (int c = 0; c < cols; ++c) sum += row[c];
      EXPECT_NEAR(sum, 1.0, 1e-12);
      if ((r / 6) % 2 == 1) {
        EXPECT_NEAR(row[at], 1.0, 1e-30 * cols + 1e-15) << "row " << r;
        for (int c = 0; c < cols; ++c)
          if (c != at) EXPECT_LT(row[c], 1e-40) << "row " << r << " col " << c;
      } else if (cols > 1) {
        EXPECT_LT(row[at], 1.0) << "row " << r << ": every element keeps a share";
      }
    }
  }
}

}  // namespace
}  // namespace softmax
