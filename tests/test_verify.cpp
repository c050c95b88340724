// SPDX-License-Identifier: MIT
// The verifier must catch what it exists to catch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/data.h"
#include "common/reference.h"
#include "common/verify.h"

namespace softmax {
namespace {

constexpr int kRows = 37, kCols = 211;

struct Fixture {
  std::vector<float> x = make_input(kRows, kCols, 42);
  std::vector<double> ref = reference_softmax(x, kRows, kCols);
  std::vector<float> y;
  Fixture() {
    for (double v : ref) y.push_back(static_cast<float>(v));
  }
};

float poison() {
  float p;
  std::memset(&p, kPoisonByte, sizeof p);
  return p;
}

TEST(Verify, AcceptsTheRoundedReference) {
  Fixture f;
  const VerifyResult r = verify(f.y, f.ref, kRows, kCols);
  EXPECT_TRUE(r.ok()) << r.report();
  EXPECT_EQ(r.bad_elements, 0);
  EXPECT_EQ(r.elements, int64_t(kRows) * kCols);
}

TEST(Verify, CatchesOneWrongElement) {
  Fixture f;
  const size_t i = 5 * kCols + 17;
  f.y[i] += 1e-4f;  // far outside 1e-8 + 1e-5 * ref, since ref <= 1
  const VerifyResult r = verify(f.y, f.ref, kRows, kCols);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.bad_elements, 1);
  ASSERT_EQ(r.first.size(), 1u);
  EXPECT_EQ(r.first[0].row, 5);
  EXPECT_EQ(r.first[0].col, 17);
  EXPECT_NE(r.report().find("(row 5, col 17)"), std::string::npos) << r.report();
}

TEST(Verify, CatchesOneUnwrittenElement) {
  Fixture f;
  f.y[kRows * kCols - 1] = poison();
  const VerifyResult r = verify(f.y, f.ref, kRows, kCols);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.bad_elements, 1);
  EXPECT_EQ(r.unwritten, 1);
  EXPECT_NE(r.report().find("never written"), std::string::npos) << r.report();
}

TEST(Verify, PoisonIsNotAValidSoftmaxValue) {
  EXPECT_TRUE(is_poison(poison()));
  EXPECT_TRUE(std::isfinite(poison()));
  EXPECT_LT(poison(), 0.f);
  EXPECT_FALSE(is_poison(0.f));
}

TEST(Verify, CatchesNaNWhereANumberBelongs) {
  Fixture f;
  f.y[3] = std::numeric_limits<float>::quiet_NaN();
  const VerifyResult r = verify(f.y, f.ref, kRows, kCols);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.bad_elements, 1);
}

TEST(Verify, CatchesANumberWhereNaNBelongs) {
  const std::vector<float> x = {1.f, std::numeric_limits<float>::quiet_NaN(), 2.f};
  const std::vector<double> ref = reference_softmax(x, 1, 3);
  const std::vector<float> y = {0.25f, 0.5f, 0.25f};
  EXPECT_EQ(verify(y, ref, 1, 3).bad_elements, 3);
  const std::vector<float> nans(3, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(verify(nans, ref, 1, 3).ok());
}

TEST(Verify, CatchesAnUnwrittenElementWhereNaNBelongs) {
  const std::vector<float> x = {1.f, std::numeric_limits<float>::infinity()};
  const std::vector<double> ref = reference_softmax(x, 1, 2);
  const std::vector<float> y = {std::numeric_limits<float>::quiet_NaN(), poison()};
  const VerifyResult r = verify(y, ref, 1, 2);
  EXPECT_EQ(r.bad_elements, 1);
  EXPECT_EQ(r.unwritten, 1);
}

TEST(Verify, ToleranceIsAtolPlusRtolTimesRef) {
  const std::vector<double> ref = {0.75, 0.25};
  // Just inside and just outside 1e-8 + 1e-5 * 0.75 on the first element (the sum check is
  // loose enough not to interfere at this size).
  const double bound = kAtol + kRtol * 0.75;
  EXPECT_TRUE(verify({float(0.75 + 0.9 * bound), 0.25f}, ref, 1, 2).bad_elements == 0);
  EXPECT_EQ(verify({float(0.75 + 1.2 * bound), 0.25f}, ref, 1, 2).bad_elements, 1);
}

TEST(Verify, CatchesARowWhoseSumDrifts) {
  // Each element within its own tolerance, all off the same way: the row sum is off by ~1e-4.
  const int n = 10000;
  const std::vector<float> x = make_input(1, n, 7);
  const std::vector<double> ref = reference_softmax(x, 1, n);
  std::vector<float> y(n);
  for (int i = 0; i < n; ++i) y[i] = float(ref[i] + 0.9 * (kAtol + kRtol * ref[i]));
  const VerifyResult r = verify(y, ref, 1, n);
  EXPECT_EQ(r.bad_elements, 0) << r.report();
  EXPECT_EQ(r.bad_rows, 1);
  EXPECT_FALSE(r.ok());
}

TEST(Data, SeededAndFresh) {
  EXPECT_EQ(make_input(3, 50, 1), make_input(3, 50, 1));
  EXPECT_NE(make_input(3, 50, 1), make_input(3, 50, 2));
  EXPECT_NE(next_seed(), next_seed());
}

TEST(Data, RowsAreNotNearUniform) {
  // The planted outliers make every row's largest probability stand out.
  const int rows = 64, cols = 781;
  const std::vector<double> ref = reference_softmax(make_input(rows, cols, 3), rows, cols);
  for (int r = 0; r < rows; ++r) {
    double top = 0;
    for (int c = 0; c < cols; ++c) top = std::max(top, ref[size_t(r) * cols + c]);
    EXPECT_GT(top, 50.0 / cols) << "row " << r;
  }
}

TEST(Data, NonFiniteRowsFollowTheDocumentedPattern) {
  const int rows = 6, cols = 40;
  const std::vector<float> x = make_input(rows, cols, 9, InputKind::kNonFinite);
  auto row = [&](int r) { return std::vector<float>(x.begin() + r * cols, x.begin() + (r + 1) * cols); };
  auto count = [](const std::vector<float>& v, auto pred) { return std::count_if(v.begin(), v.end(), pred); };
  EXPECT_GT(count(row(0), [](float v) { return v == -INFINITY; }), 0);
  EXPECT_EQ(count(row(1), [](float v) { return v == -INFINITY; }), cols);
  EXPECT_EQ(count(row(2), [](float v) { return v == INFINITY; }), 1);
  EXPECT_EQ(count(row(3), [](float v) { return std::isnan(v); }), 1);
  EXPECT_EQ(count(row(5), [](float v) { return !std::isfinite(v); }), 0);
}

TEST(Data, EndPositionsCoverBothEnds) {
  // 0, N-1, 1, N-2, 2, N-3, then again: the three elements of a partial head or tail slot.
  const int want[] = {0, 9, 1, 8, 2, 7, 0, 9};
  for (int r = 0; r < 8; ++r) EXPECT_EQ(end_position(r, 10), want[r]) << r;
  for (int cols : {1, 2, 3, 4, 5}) {
    std::set<int> seen;
    for (int r = 0; r < 6; ++r) {
      const int c = end_position(r, cols);
      EXPECT_GE(c, 0);
      EXPECT_LT(c, cols);
      seen.insert(c);
    }
    EXPECT_EQ(seen.size(), size_t(std::min(cols, 6))) << "every column of a short row";
  }
}

TEST(Data, MaxAtEndsPlantsTheRowMaximumAtTheEnd) {
  const int rows = 24, cols = 37;
  const std::vector<float> x = make_input(rows, cols, 5, InputKind::kMaxAtEnds);
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    const int at = end_position(r, cols);
    float rest = -INFINITY;
    for (int c = 0; c < cols; ++c) {
      ASSERT_TRUE(std::isfinite(row[c]));
      if (c != at) rest = std::max(rest, row[c]);
    }
    EXPECT_FLOAT_EQ(row[at] - rest, (r / 6) % 2 == 0 ? 4.f : 100.f) << "row " << r;
  }
  EXPECT_EQ(make_input(3, 50, 1, InputKind::kMaxAtEnds),
            make_input(3, 50, 1, InputKind::kMaxAtEnds));
}

TEST(Data, OneFiniteAtEndsHasOneFiniteValuePerRow) {
  const int rows = 24, cols = 13;
  const std::vector<float> x = make_input(rows, cols, 6, InputKind::kOneFiniteAtEnds);
  for (int r = 0; r < rows; ++r) {
    const int at = end_position(r, cols);
    for (int c = 0; c < cols; ++c) {
      const float v = x[r * cols + c];
      if (c == at) {
        EXPECT_TRUE(std::isfinite(v));
        EXPECT_LE(std::fabs(v), 80.f);
      } else {
        EXPECT_EQ(v, -INFINITY) << "row " << r << " col " << c;
      }
    }
  }
}

TEST(Data, EveryKindHasItsOwnName) {
  std::set<std::string> names;
  for (InputKind kind : kAllInputKinds) {
    const std::string name = to_string(kind);
    EXPECT_NE(name, "?");
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos)
        << name << ": test names are built from it";
    names.insert(name);
  }
  EXPECT_EQ(names.size(), std::size(kAllInputKinds));
  EXPECT_EQ(std::size(kAllInputKinds), size_t(InputKind::kOneFiniteAtEnds) + 1) << "a kind missing";
}

}  // namespace
}  // namespace softmax
