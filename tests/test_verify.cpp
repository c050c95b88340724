// SPDX-License-Identifier: MIT
// The verifier must catch what it exists to catch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
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

}  // namespace
}  // namespace softmax
