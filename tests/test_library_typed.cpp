// SPDX-License-Identifier: MIT
// The library in bfloat16 and float16 (forward) and in every dtype backward
// (fastsoftmax/src/typed_rows.cuh): each mapping, with 16-byte packs and one element an access,
// rows starting on and off 16-byte boundaries, in place, against a double-precision reference
// computed from the very inputs the GPU saw (rounded to the dtype).
//
// Tolerances, per element (ulp: the unit in the last place of the dtype at the reference value;
// tiny: the dtype's smallest step near zero, 2^-24 in float16, 2^-133 in bfloat16, 2^-149 in
// float32):
//   forward:  |y - ref| <= ulp(ref) + tiny, and |sum of a row - 1| <= eps + cols * tiny + 1e-5,
//             eps = 2^-7 (bfloat16), 2^-10 (float16): each element rounded to half an ulp, one
//             more for the float32 exponential;
//   backward: |dx - ref| <= ulp(ref) + tiny + 2^-24 * (64 + cols / 64) * |y| * (|dy| + s),
//             s = sum |dy * y| over the row: the float32 sum of the row's products, whose
//             rounding grows with the terms a thread adds (cols / 64 bounds them) and the
//             reduction's levels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/data.h"
#include "common/device_buffer.h"
#include "common/reference.h"
#include "fastsoftmax/softmax.h"
#include "gpu_test.h"
#include "refusal.h"

namespace {

template <typename T>
struct DType;
template <>
struct DType<float> {
  static constexpr const char* kName = "float32";
  static constexpr int kMantissa = 23;
  static constexpr int kMinExp = -126;  // smallest normal exponent
  static float in(float v) { return v; }
  static float out(float v) { return v; }
};
template <>
struct DType<__half> {
  static constexpr const char* kName = "float16";
  static constexpr int kMantissa = 10;
  static constexpr int kMinExp = -14;
  static float in(__half v) { return __half2float(v); }
  static __half out(float v) { return __float2half_rn(v); }
};
template <>
struct DType<__nv_bfloat16> {
  static constexpr const char* kName = "bfloat16";
  static constexpr int kMantissa = 7;
  static constexpr int kMinExp = -126;
  static float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

template <typename T>
double tiny() {
  return std::ldexp(1.0, DType<T>::kMinExp - DType<T>::kMantissa);
}
template <typename T>
double ulp(double v) {
  v = std::fabs(v);
  if (v == 0) return tiny<T>();
  const int e = std::max(std::ilogb(v), DType<T>::kMinExp);
  return std::ldexp(1.0, e - DType<T>::kMantissa);
}

struct Case {
  const char* name;
  int rows, cols;
  int off_a, off_b, off_out;  // elements past a 256-byte aligned allocation
  const char* path;           // describe()'s path
  bool packs;                 // 16-byte packs (false: one element an access)
  int in_place = 0;           // 0 none; forward 1: y = x; backward 1: dx = dy, 2: dx = y
};

// Under compute-sanitizer's synccheck, which cannot check clusters of more than 8 CTAs
// (tools/sanitize.sh sets SOFTMAX_TESTS_MAX_CLUSTER=8 for it; docs/notes/tuning.md,
// "Sanitizers"): whether the plan's clusters are larger than that, in which case the case is not
// launched and says so. Unset, every case runs.
bool past_cluster_limit(const fastsoftmax::Plan& plan, const Case& c) {
  const char* limit = std::getenv("SOFTMAX_TESTS_MAX_CLUSTER");
  const size_t at = plan.config.find("clusters of ");
  if (limit == nullptr || at == std::string::npos) return false;
  const int ctas = std::atoi(plan.config.c_str() + at + 12);
  if (ctas <= std::atoi(limit)) return false;
  std::printf("[ NOT RUN  ] %s: clusters of %d CTAs, past SOFTMAX_TESTS_MAX_CLUSTER=%s\n", c.name,
              ctas, limit);
  return true;
}

// Device memory holding `count` elements at element offset `off` of a fresh allocation.
template <typename T>
struct Placed {
  softmax::DeviceBuffer<T> buffer;
  T* ptr;
  Placed(size_t count, int off) : buffer(count + 16), ptr(buffer.get() + off) {}
};

template <typename T>
void upload(T* dst, const std::vector<T>& src) {
  ASSERT_EQ(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
}
template <typename T>
std::vector<T> download(const T* src, size_t count) {
  std::vector<T> out(count);
  EXPECT_EQ(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// The harness's input (common/data.h: normal values with planted outliers), plus `shift`, rounded
// to T; `exact` gets the rounded values back in float, which is what the GPU sees and the
// reference is taken of.
template <typename T>
std::vector<T> rounded_input(int rows, int cols, uint64_t seed, std::vector<float>& exact,
                             float shift = 0.f) {
  exact = softmax::make_input(rows, cols, seed);
  std::vector<T> x(exact.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = DType<T>::out(exact[i] + shift);
    exact[i] = DType<T>::in(x[i]);
  }
  return x;
}

template <typename T>
void check_forward(const Case& c, float shift = 0.f) {
  const size_t n = size_t(c.rows) * c.cols;
  std::vector<float> exact;
  const std::vector<T> x = rounded_input<T>(c.rows, c.cols, softmax::next_seed(), exact, shift);
  const std::vector<double> ref = softmax::reference_softmax(exact, c.rows, c.cols);

  Placed<T> dx(n, c.off_a), dy(n, c.off_out);
  T* out = c.in_place == 1 ? dx.ptr : dy.ptr;
  upload(dx.ptr, x);
  const fastsoftmax::Plan plan = fastsoftmax::describe(dx.ptr, out, c.rows, c.cols);
  EXPECT_EQ(plan.path, c.path) << plan.why;
  EXPECT_NE(
      plan.config.find(c.packs ? (sizeof(T) == 2 ? "packs of 8" : "packs of 4") : "packs of 1"),
      std::string::npos)
      << plan.config;
  if (past_cluster_limit(plan, c)) return;
  fastsoftmax::softmax(dx.ptr, out, c.rows, c.cols);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<T> y = download(out, n);

  int bad = 0;
  double worst_sum = 0;
  for (int r = 0; r < c.rows; ++r) {
    double sum = 0;
    for (int col = 0; col < c.cols; ++col) {
      const size_t i = size_t(r) * c.cols + col;
      const double got = DType<T>::in(y[i]);
      sum += got;
      if (!(std::fabs(got - ref[i]) <= ulp<T>(ref[i]) + tiny<T>()) && bad++ < 5) {
        ADD_FAILURE() << DType<T>::kName << " row " << r << " col " << col << ": got " << got
                      << ", reference " << ref[i] << " (x = " << DType<T>::in(x[i]) << ")";
      }
    }
    worst_sum = std::max(worst_sum, std::fabs(sum - 1));
  }
  EXPECT_EQ(bad, 0) << "elements out of tolerance";
  const double sum_tol = std::ldexp(1.0, -DType<T>::kMantissa) + c.cols * tiny<T>() + 1e-5;
  EXPECT_LE(worst_sum, sum_tol) << "a row's sum is off 1 by more than the dtype holds";
}

template <typename T>
void check_backward(const Case& c) {
  const size_t n = size_t(c.rows) * c.cols;
  std::vector<float> exact, unused;
  rounded_input<T>(c.rows, c.cols, softmax::next_seed(), exact);
  const std::vector<double> soft = softmax::reference_softmax(exact, c.rows, c.cols);
  const std::vector<T> g = rounded_input<T>(c.rows, c.cols, softmax::next_seed(), unused);
  std::vector<T> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = DType<T>::out(float(soft[i]));
  Placed<T> py(n, c.off_a), pg(n, c.off_b), pd(n, c.off_out);
  upload(py.ptr, y);
  upload(pg.ptr, g);
  T* dx = c.in_place == 1 ? pg.ptr : c.in_place == 2 ? py.ptr : pd.ptr;
  const fastsoftmax::Plan plan = fastsoftmax::describe_backward(py.ptr, pg.ptr, dx, c.rows, c.cols);
  EXPECT_EQ(plan.path, c.path) << plan.why;
  EXPECT_NE(
      plan.config.find(c.packs ? (sizeof(T) == 2 ? "packs of 8" : "packs of 4") : "packs of 1"),
      std::string::npos)
      << plan.config;
  if (past_cluster_limit(plan, c)) return;
  fastsoftmax::softmax_backward(py.ptr, pg.ptr, dx, c.rows, c.cols);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<T> got = download(dx, n);

  const double per_term = std::ldexp(1.0, -24) * (64 + c.cols / 64.0);
  int bad = 0;
  for (int r = 0; r < c.rows; ++r) {
    const size_t base = size_t(r) * c.cols;
    double dot = 0, dot_abs = 0;
    for (int col = 0; col < c.cols; ++col) {
      const double p = double(DType<T>::in(y[base + col])) * DType<T>::in(g[base + col]);
      dot += p;
      dot_abs += std::fabs(p);
    }
    for (int col = 0; col < c.cols; ++col) {
      const size_t i = base + col;
      const double yi = DType<T>::in(y[i]), gi = DType<T>::in(g[i]);
      const double ref = yi * (gi - dot);
      const double tol =
          ulp<T>(ref) + tiny<T>() + per_term * std::fabs(yi) * (std::fabs(gi) + dot_abs);
      const double v = DType<T>::in(got[i]);
      if (!(std::fabs(v - ref) <= tol) && bad++ < 5) {
        ADD_FAILURE() << DType<T>::kName << " row " << r << " col " << col << ": got " << v
                      << ", reference " << ref << ", tolerance " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "elements out of tolerance";
}

// Packs of 8 in 16-bit (4 in float32): a group of 1-32 lanes up to 32 packs; a warp, then blocks
// of 128 and 256 threads, with just enough packs a thread (at most 8 packs forward, 4 of each
// stream backward in 16-bit, 8 of each in float32, then 1024 threads with 4 of each in float32);
// in 16-bit ("words"), blocks of 128-1024 threads holding up to 8 packs of each stream in the
// dtype (all of the backward's blocks; the forward's past 128 threads on more rows than SMs); then
// the row in shared memory, a CTA of 256 or 512 threads a row on many rows, clusters of 2-16 (two
// CTAs an SM, or one) on long or few rows; past what 16 CTAs hold, two passes (several blocks a row
// on few rows). One element an access (the pointers' offsets differ): a warp with one, two or four
// a lane, blocks of 128-1024 threads, two passes. Offsets (3, 3): rows start off 16-byte boundaries
// (heads and tails); (1, 2): one element an access. Where the path depends on whether rows
// outnumber the SMs, the cases take at most 100 rows or at least 200 (GPUs have 108-148 SMs).
const Case kForward16[] = {
    {"group1", 4097, 5, 0, 0, 0, "typed_group", true},
    {"group2_unaligned", 3001, 13, 3, 3, 3, "typed_group", true},
    {"group8", 2000, 64, 0, 0, 0, "typed_group", true},
    {"group16_unaligned", 1500, 100, 3, 3, 3, "typed_group", true},
    {"group32_many_rows", 9000, 200, 0, 0, 0, "typed_group", true},
    {"warp2", 700, 500, 3, 3, 3, "typed_warp", true},
    {"warp4", 600, 1000, 0, 0, 0, "typed_warp", true},
    {"warp6_unaligned", 300, 1501, 3, 3, 3, "typed_warp", true},
    // 6-8 packs a lane take blocks of one warp (8500 rows: more blocks than the SMs hold at once)
    {"warp7_blocks_of_a_warp_many_rows", 8500, 1600, 0, 0, 0, "typed_warp", true},
    {"warp8_blocks_of_a_warp_unaligned", 301, 2047, 1, 1, 1, "typed_warp", true},
    {"block128x3_unaligned", 300, 3001, 3, 3, 3, "typed_block", true},
    {"block128x6", 200, 6000, 0, 0, 0, "typed_block", true},
    {"block256x6_unaligned", 90, 12003, 3, 3, 3, "typed_block", true},
    {"words256x8", 200, 16384, 0, 0, 0, "typed_block", true},
    {"words512x5_unaligned", 200, 20001, 3, 3, 3, "typed_block", true},
    {"words512x8", 200, 32768, 0, 0, 0, "typed_block", true},
    {"words1024x5_unaligned", 200, 33001, 3, 3, 3, "typed_block", true},
    {"smem_cta_a_row", 100, 20000, 0, 0, 0, "typed_smem", true},
    {"words_cluster_was_smem_512_threads_cta_a_row", 100, 40000, 0, 0, 0, "typed_words_cluster",
     true},
    {"smem_256_threads_cluster4", 20, 20000, 0, 0, 0, "typed_smem", true},
    {"words_cluster_was_smem_cluster2_unaligned", 133, 70001, 3, 3, 3, "typed_words_cluster", true},
    {"words_cluster_was_smem_few_rows_cluster3", 40, 40000, 0, 0, 0, "typed_words_cluster", true},
    {"words_cluster_was_smem_cluster16_unaligned", 8, 300001, 3, 3, 3, "typed_words_cluster", true},
    // Several rows a cluster (fewer than 8 rounds of the clusters of 3 that fit, so the balanced
    // count, all resident): every set and phase of the forward's exchange barriers comes round.
    {"words_cluster_rows_past_fit", 400, 70001, 0, 0, 0, "typed_words_cluster", true},
    {"smem_cluster11", 20, 600001, 0, 0, 0, "typed_smem", true},
    {"spread_where_smem_cluster16_4_rows", 4, 600001, 0, 0, 0, "typed_spread", true},
    {"spread_where_smem_alone_cluster16", 2, 1000003, 0, 0, 0, "typed_spread", true},
    {"spread_where_smem_ctas_alone_on_sms", 20, 1000003, 3, 3, 3, "typed_spread", true},
    {"spread_unaligned", 2, 1900003, 3, 3, 3, "typed_spread", true},
    {"scalar_group", 500, 31, 1, 1, 2, "typed_group", false},
    {"scalar_warp", 500, 100, 1, 1, 2, "typed_warp", false},
    {"scalar_block", 200, 3000, 1, 1, 2, "typed_block", false},
    {"scalar_two_pass", 10, 40000, 1, 1, 2, "typed_two_pass", false},
    {"in_place", 300, 1000, 3, 3, 3, "typed_warp", true, 1},
    {"in_place_words", 200, 20001, 3, 3, 3, "typed_block", true, 1},
    {"in_place_spread", 1, 1900003, 3, 3, 3, "typed_spread", true, 1},
    {"in_place_cluster", 10, 40003, 3, 3, 3, "typed_words_cluster", true, 1},
    {"head_and_tail_only", 1000, 3, 6, 6, 6, "typed_group", true},  // 2 head, no pack, 1 tail
};

const Case kBackward16[] = {
    {"words_cluster13_8_packs_unaligned", 4, 400001, 3, 3, 3, "typed_words_cluster", true},
    {"group4_unaligned", 3000, 29, 3, 3, 3, "typed_group", true},
    {"group32", 2000, 250, 0, 0, 0, "typed_group", true},
    {"warp4_unaligned", 500, 1001, 3, 3, 3, "typed_warp", true},
    {"block128x3", 200, 3000, 0, 0, 0, "typed_block", true},
    {"words128x7_unaligned", 140, 7001, 3, 3, 3, "typed_block", true},
    {"words256x5", 140, 9000, 0, 0, 0, "typed_block", true},
    {"words256x8_unaligned", 140, 16001, 3, 3, 3, "typed_block", true},
    {"words512x8_unaligned", 140, 32767, 3, 3, 3, "typed_block", true},
    {"words_cluster_was_smem_cluster2_two_rows_unaligned", 140, 40001, 3, 3, 3,
     "typed_words_cluster", true},
    {"words_cluster_was_smem_few_rows_cluster2", 50, 40003, 0, 0, 0, "typed_words_cluster", true},
    {"words_cluster_was_smem_cluster16_unaligned", 3, 250001, 3, 3, 3, "typed_words_cluster", true},
    {"smem_cluster11_unaligned", 20, 600001, 3, 3, 3, "typed_smem", true},
    {"spread_where_smem_alone_cluster16", 2, 600001, 0, 0, 0, "typed_spread", true},
    {"spread", 2, 1000003, 0, 0, 0, "typed_spread", true},
    {"in_place_dy_spread", 1, 1000003, 3, 3, 3, "typed_spread", true, 1},
    {"scalar_warp", 400, 100, 1, 2, 1, "typed_warp", false},
    {"scalar_two_pass", 10, 20001, 2, 1, 1, "typed_two_pass", false},
    {"in_place_dy", 100, 3001, 3, 3, 3, "typed_block", true, 1},
    {"in_place_dy_words", 140, 5001, 3, 3, 3, "typed_block", true, 1},
    {"in_place_y_cluster", 10, 40001, 3, 3, 3, "typed_words_cluster", true, 2},
    {"in_place_dy_cluster", 10, 40001, 3, 3, 3, "typed_words_cluster", true, 1},
    {"head_and_tail_only", 1000, 3, 6, 6, 6, "typed_group", true},
};

const Case kBackward32[] = {
    {"words_cluster16_8_packs_unaligned", 8, 262147, 2, 2, 2, "typed_words_cluster", true},
    {"in_place_dy_cluster16_8_packs", 4, 262147, 2, 2, 2, "typed_words_cluster", true, 1},
    {"group1", 5000, 1, 0, 0, 0, "typed_group", true},
    {"group2_unaligned", 3000, 7, 1, 1, 1, "typed_group", true},
    {"warp2", 700, 200, 0, 0, 0, "typed_warp", true},
    {"warp8_unaligned", 300, 1001, 3, 3, 3, "typed_warp", true},
    {"block128x6_unaligned", 300, 3001, 3, 3, 3, "typed_block", true},
    {"block256x6", 100, 6001, 0, 0, 0, "typed_block", true},
    {"block1024x4", 40, 16000, 0, 0, 0, "typed_block", true},
    {"words_cluster_was_smem_few_rows_cluster3", 40, 20000, 0, 0, 0, "typed_words_cluster", true},
    {"words_cluster_was_smem_cluster2_unaligned", 140, 20001, 2, 2, 2, "typed_words_cluster", true},
    // Several rows a cluster of 9 (150 rows are under 8 rounds of the clusters that fit: the
    // balanced count, all resident): every set and phase of the exchange barriers comes round.
    {"words_cluster_rows_past_fit", 150, 65537, 0, 0, 0, "typed_words_cluster", true},
    {"smem_cluster11_unaligned", 20, 300001, 2, 2, 2, "typed_smem", true},
    {"spread_where_smem_alone_cluster16_unaligned", 2, 300001, 2, 2, 2, "typed_spread", true},
    {"spread_unaligned", 2, 500001, 2, 2, 2, "typed_spread", true},
    {"spread_eight_rows", 8, 500000, 0, 0, 0, "typed_spread", true},
    {"in_place_y_spread", 1, 500001, 2, 2, 2, "typed_spread", true, 2},
    {"scalar_block", 200, 1000, 1, 2, 3, "typed_block", false},
    {"in_place_dy", 100, 999, 1, 1, 1, "typed_warp", true, 1},
};

// One test a suite, each case under its own trace: the cases share one process (and one CUDA
// context), which keeps the default test set's start-up time down.
class TypedPaths : public softmax::testing::GpuTest<> {
 protected:
  template <typename T, size_t K>
  void forward(const Case (&cases)[K]) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(DType<T>::kName) + " forward " + c.name);
      check_forward<T>(c);
    }
  }
  template <typename T, size_t K>
  void backward(const Case (&cases)[K]) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(DType<T>::kName) + " backward " + c.name);
      check_backward<T>(c);
    }
  }
};

TEST_F(TypedPaths, ForwardBf16) {
  forward<__nv_bfloat16>(kForward16);
  Placed<__nv_bfloat16> x(size_t(300) * 1501, 0);
  const auto config = [&](int cols) {
    return fastsoftmax::describe(x.ptr, x.ptr, 300, cols).config;
  };
  EXPECT_NE(config(1501).find("6 packs of 8 a thread, blocks of one warp"), std::string::npos)
      << config(1501);
  EXPECT_EQ(config(1000).find("blocks of one warp"), std::string::npos) << config(1000);
}
TEST_F(TypedPaths, ForwardF16) { forward<__half>(kForward16); }

// Inputs far from 0 on the word kernels, whose forward folds exp(x - m) into one FMA on
// m * log2(e) rounded to float32 where |m| < 1024, and takes exp_ past that: both sides of the
// bound, and values where folding would fail (results move by about |m| * 2^-23 relative: about
// 3 fp16 ulps at 30000, everything at 1e30 in bf16, where a row rounds to a few levels). Within
// the tolerance of one ulp a fold up to a few thousand would pass too; the bound keeps it to a
// sixth of an ulp.
const Case kFarForward16[] = {
    {"words512x5_unaligned", 200, 20001, 3, 3, 3, "typed_block", true},
    {"words_cluster_unaligned", 133, 70001, 3, 3, 3, "typed_words_cluster", true},
};
TEST_F(TypedPaths, ForwardFarFromZero) {
  for (const Case& c : kFarForward16) {
    Placed<__half> probe(size_t(c.rows) * c.cols + 8, 0);  // the word kernel, not float blocks
    EXPECT_NE(fastsoftmax::describe(probe.ptr + c.off_a, probe.ptr + c.off_out, c.rows, c.cols)
                  .config.find("held in the dtype"),
              std::string::npos);
    for (const float shift : {-1000.f, 1000.f, 1100.f, -5000.f, 30000.f}) {
      SCOPED_TRACE(std::string("float16 forward ") + c.name + " shift " + std::to_string(shift));
      check_forward<__half>(c, shift);
    }
    for (const float shift : {1000.f, -1e5f, 1e30f}) {
      SCOPED_TRACE(std::string("bfloat16 forward ") + c.name + " shift " + std::to_string(shift));
      check_forward<__nv_bfloat16>(c, shift);
    }
  }
}
TEST_F(TypedPaths, BackwardBf16) { backward<__nv_bfloat16>(kBackward16); }
TEST_F(TypedPaths, BackwardF16) { backward<__half>(kBackward16); }
TEST_F(TypedPaths, BackwardF32) { backward<float>(kBackward32); }

// The same shapes with the word clusters off (FASTSOFTMAX_TYPED_CLUSTER_WORDS=0): typed_smem
// (few rows on clusters of 16: typed_spread).
const Case kSmemForward16[] = {
    {"smem_512_threads_cta_a_row", 100, 40000, 0, 0, 0, "typed_smem", true},
    {"smem_cluster2_unaligned", 133, 70001, 3, 3, 3, "typed_smem", true},
    {"smem_few_rows_cluster3", 40, 40000, 0, 0, 0, "typed_smem", true},
    {"spread_where_smem_cluster16_unaligned", 6, 300001, 3, 3, 3, "typed_spread", true},
    {"in_place_cluster", 10, 40003, 3, 3, 3, "typed_smem", true, 1},
};
const Case kSmemBackward16[] = {
    {"smem_cluster2_two_rows_unaligned", 140, 40001, 3, 3, 3, "typed_smem", true},
    {"smem_few_rows_cluster2", 50, 40003, 0, 0, 0, "typed_smem", true},
    {"spread_where_smem_cluster16_unaligned", 3, 250001, 3, 3, 3, "typed_spread", true},
    {"in_place_y_cluster", 10, 40001, 3, 3, 3, "typed_smem", true, 2},
    {"in_place_dy_cluster", 10, 40001, 3, 3, 3, "typed_smem", true, 1},
};

const Case kSmemBackward32[] = {
    {"smem_few_rows_cluster3", 40, 20000, 0, 0, 0, "typed_smem", true},
    {"smem_cluster2_unaligned", 140, 20001, 2, 2, 2, "typed_smem", true},
};

// An environment setting the library reads each call, for a test's lifetime (unset again also
// when a check throws).
struct ScopedSetting {
  const char* name;
  ScopedSetting(const char* n, const char* value) : name(n) { setenv(name, value, 1); }
  ~ScopedSetting() { unsetenv(name); }
};

TEST_F(TypedPaths, SmemWithoutWordClusters) {
  const ScopedSetting off("FASTSOFTMAX_TYPED_CLUSTER_WORDS", "0");
  forward<__nv_bfloat16>(kSmemForward16);
  backward<__half>(kSmemBackward16);
  backward<float>(kSmemBackward32);
}

// With clusters turned off (set_clusters_enabled(false), as FASTSOFTMAX_NO_CLUSTERS does), a row
// that one CTA holds takes one, on few rows too, and a longer one takes two passes.
const Case kNoClusters16[] = {
    {"smem_few_rows_one_cta", 40, 40000, 3, 3, 3, "typed_smem", true},
    {"spread_past_one_cta", 4, 600001, 0, 0, 0, "typed_spread", true},
};
const Case kNoClusters32[] = {
    {"smem_one_cta_alone", 40, 20000, 0, 0, 0, "typed_smem", true},
};

TEST_F(TypedPaths, WithoutClusters) {
  fastsoftmax::set_clusters_enabled(false);
  struct Restore {  // clusters back on for the tests after this one, also when a check throws
    ~Restore() { fastsoftmax::set_clusters_enabled(true); }
  } restore;
  forward<__nv_bfloat16>(kNoClusters16);
  backward<float>(kNoClusters32);
  Placed<__nv_bfloat16> x(40 * 40000, 0), y(40 * 40000, 0);
  const fastsoftmax::Plan plan = fastsoftmax::describe(x.ptr, y.ptr, 40, 40000);
  EXPECT_NE(plan.config.find("clusters of 1 CTAs"), std::string::npos) << plan.config;
}

// Word clusters over 8 rounds or more of the clusters that fit (1000 rows of clusters of 3 keep it
// so up to 125 clusters of 3, 1200 rows up to 150): the grid queues far more clusters than fit, a
// row a cluster forward (clusters of 3 here: a block of 1024 takes forward rows up to 65536
// values), two rows a cluster backward, at any cluster size: 3 CTAs in 16-bit, 5 CTAs of 4 packs
// (two an SM, at most 52 clusters) and 9 CTAs of 8 with dy in shared memory (two an SM, 21
// clusters on the H200) in float32, odd row counts leaving the last cluster one row. Fewer rows
// keep the balanced count, all resident.
const Case kQueuedForward16[] = {
    {"words_cluster_queued", 1000, 70001, 0, 0, 0, "typed_words_cluster", true},
};
const Case kQueuedBackward16[] = {
    {"words_cluster_queued_unaligned", 1200, 33001, 3, 3, 3, "typed_words_cluster", true},
};
const Case kQueuedBackward32[] = {
    {"words_cluster5_queued_unaligned", 421, 40001, 1, 1, 1, "typed_words_cluster", true},
    // Rows of whole 128-byte lines, queued: dy staged by bulk copies, a CTA's chunk rounded up to
    // whole lines (3890 packs to 3896, the last CTA 3840).
    {"words_cluster9_queued_bulk", 181, 140032, 0, 0, 0, "typed_words_cluster", true},
};

TEST_F(TypedPaths, QueuedWordClusters) {
  forward<__nv_bfloat16>(kQueuedForward16);
  backward<__half>(kQueuedBackward16);
  backward<float>(kQueuedBackward32);
  Placed<__half> h(size_t(1000) * 70001, 0);
  Placed<float> f(size_t(181) * 140032, 0);  // the larger of the two
  const auto expect_in = [](const fastsoftmax::Plan& plan, const char* grid) {
    EXPECT_NE(plan.config.find(grid), std::string::npos) << plan.config;
  };
  expect_in(fastsoftmax::describe(h.ptr, h.ptr, 1000, 70001), "queued, a row a cluster");
  expect_in(fastsoftmax::describe_backward(h.ptr, h.ptr, h.ptr, 1200, 33001),
            "queued, two rows a cluster");
  expect_in(fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 421, 40001), "clusters of 5 CTAs");
  expect_in(fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 421, 40001),
            "queued, two rows a cluster");
  expect_in(fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 181, 140032), "clusters of 9 CTAs");
  expect_in(fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 181, 140032),
            "(dy in shared memory by bulk copies), queued, two rows a cluster");
  // Off the lines (140001 floats a row), or resident: 16 bytes a thread.
  expect_in(fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 181, 140001),
            "(dy in shared memory), queued");
  expect_in(fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 100, 140032),
            "(dy in shared memory), ");
  expect_in(fastsoftmax::describe(h.ptr, h.ptr, 400, 70001), "clusters resident");
}

// The staged backward's bulk copy forced (FASTSOFTMAX_TYPED_STAGED_BULK=1) where the rule takes
// cp.async: rows off the 128-byte lines, resident clusters, in place, in every dtype.
const Case kBulkBackward16[] = {
    {"words_cluster13_bulk_unaligned", 4, 400001, 3, 3, 3, "typed_words_cluster", true},
    {"in_place_dy_cluster9_bulk", 3, 280003, 1, 1, 1, "typed_words_cluster", true, 1},
};
const Case kBulkBackward32[] = {
    {"words_cluster16_bulk_unaligned", 8, 262147, 2, 2, 2, "typed_words_cluster", true},
    {"in_place_y_cluster10_bulk", 4, 150001, 1, 1, 1, "typed_words_cluster", true, 2},
};

TEST_F(TypedPaths, StagedBulkForced) {
  const ScopedSetting forced("FASTSOFTMAX_TYPED_STAGED_BULK", "1");
  backward<__half>(kBulkBackward16);
  backward<__nv_bfloat16>(kBulkBackward16);
  backward<float>(kBulkBackward32);
  Placed<float> f(size_t(8) * 262147, 0);
  const fastsoftmax::Plan plan = fastsoftmax::describe_backward(f.ptr, f.ptr, f.ptr, 8, 262147);
  EXPECT_NE(plan.config.find("by bulk copies"), std::string::npos) << plan.config;
}

// -inf and a large value in 16-bit: exp(-inf) = 0 and no overflow (the max is taken first); a
// NaN makes its row NaN.
class TypedEdgeValues : public softmax::testing::GpuTest<> {
 protected:
  static void infinity_and_large_values(int rows, int cols) {
    std::vector<__nv_bfloat16> x(size_t(rows) * cols, __float2bfloat16_rn(0.f));
    x[0] = __float2bfloat16_rn(-INFINITY);
    x[1] = __float2bfloat16_rn(3.0e38f);
    x[cols] = __float2bfloat16_rn(-INFINITY);
    x[2 * cols + cols / 2] = __float2bfloat16_rn(NAN);  // a NaN makes its whole row NaN
    Placed<__nv_bfloat16> d(x.size(), 0);
    upload(d.ptr, x);
    fastsoftmax::softmax(d.ptr, d.ptr, rows, cols);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = download(d.ptr, x.size());
    EXPECT_EQ(__bfloat162float(y[0]), 0.f);
    EXPECT_EQ(__bfloat162float(y[1]), 1.f);
    EXPECT_EQ(__bfloat162float(y[2]), 0.f);
    EXPECT_EQ(__bfloat162float(y[cols - 1]), 0.f);
    EXPECT_EQ(__bfloat162float(y[cols]), 0.f);
    EXPECT_NEAR(__bfloat162float(y[cols + 1]), 1.0 / (cols - 1),
                ulp<__nv_bfloat16>(1.0 / (cols - 1)));
    EXPECT_NEAR(__bfloat162float(y[2 * cols - 1]), 1.0 / (cols - 1),
                ulp<__nv_bfloat16>(1.0 / (cols - 1)));
    EXPECT_TRUE(std::isnan(__bfloat162float(y[2 * cols])));
    EXPECT_TRUE(std::isnan(__bfloat162float(y[3 * cols - 1])));
  }
};
TEST_F(TypedEdgeValues, InfinityAndLargeValuesInBf16) {
  // A warp a row, a block of 128 in float32, blocks of 256, 512 and 1024 holding the row in the
  // dtype (more rows than SMs), a cluster of word CTAs.
  for (const int cols : {1000, 3001, 16384, 20000, 40000, 70001}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    infinity_and_large_values(200, cols);
  }
}
TEST_F(TypedEdgeValues, InfinityAndLargeValuesInBf16InSharedMemory) {
  // Rows in shared memory (word clusters off; the shapes of kSmemForward16): a CTA a row, a
  // cluster of two, a cluster of three.
  const ScopedSetting off("FASTSOFTMAX_TYPED_CLUSTER_WORDS", "0");
  for (const auto [rows, cols] :
       {std::pair{100, 40000}, std::pair{133, 70001}, std::pair{40, 40000}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Placed<__nv_bfloat16> x(size_t(rows) * cols, 0);
    ASSERT_EQ(fastsoftmax::describe(x.ptr, x.ptr, rows, cols).path, "typed_smem");
    infinity_and_large_values(rows, cols);
  }
}

// bf16 outputs under 2^-126 (float32's smallest normal) that bf16 holds as subnormals: a row of
// zeros and one -80 gives exp(-80) / (cols - 1), about 1e-39 at 20001 columns, on the word block
// and the word cluster kernels.
TEST_F(TypedEdgeValues, SubnormalOutputsInBf16) {
  for (const auto [rows, cols] : {std::pair{200, 20001}, std::pair{133, 70001}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    std::vector<__nv_bfloat16> x(size_t(rows) * cols, __float2bfloat16_rn(0.f));
    for (int r = 0; r < rows; ++r) {
      x[size_t(r) * cols + (r * 7919) % cols] = __float2bfloat16_rn(-80.f);
    }
    Placed<__nv_bfloat16> d(x.size(), 0);
    upload(d.ptr, x);
    ASSERT_NE(fastsoftmax::describe(d.ptr, d.ptr, rows, cols).config.find("held in the dtype"),
              std::string::npos);
    fastsoftmax::softmax(d.ptr, d.ptr, rows, cols);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = download(d.ptr, x.size());
    const double small = std::exp(-80.0) / (std::exp(-80.0) + (cols - 1));
    const double large = 1.0 / (std::exp(-80.0) + (cols - 1));
    int bad = 0;
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const double ref = c == (r * 7919) % cols ? small : large;
        const double got = __bfloat162float(y[size_t(r) * cols + c]);
        if (!(std::fabs(got - ref) <= ulp<__nv_bfloat16>(ref) + tiny<__nv_bfloat16>()) &&
            bad++ < 3) {
          ADD_FAILURE() << "row " << r << " col " << c << ": got " << got << ", reference " << ref;
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

// Host-side checks: refused before any memory is touched, so no GPU is needed.
using softmax::testing::refusal;
template <typename T>
T* fake(uintptr_t byte_offset = 0) {
  return reinterpret_cast<T*>((uintptr_t(1) << 20) + byte_offset);
}

TEST(TypedContract, SixteenBitForwardRefusesNamingTheProblem) {
  using B = __nv_bfloat16;
  EXPECT_NE(refusal([] {
              fastsoftmax::softmax(fake<B>(1), fake<B>(64), 2, 8);
            }).find("x is not 2-byte aligned"),
            std::string::npos);
  EXPECT_NE(
      refusal([] { fastsoftmax::softmax(fake<__half>(), fake<__half>(4), 2, 8); }).find("overlap"),
      std::string::npos);
  EXPECT_NE(refusal([] {
              fastsoftmax::softmax(fake<B>(), static_cast<B*>(nullptr), 2, 8);
            }).find("y is null"),
            std::string::npos);
  EXPECT_NE(
      refusal([] { fastsoftmax::softmax(fake<__half>(), fake<__half>(64), 1, -2); }).find("cols"),
      std::string::npos);
  // Empty: nothing to do, null pointers allowed.
  EXPECT_EQ(refusal([] { fastsoftmax::softmax(static_cast<B*>(nullptr), nullptr, 0, 8); }), "");
  EXPECT_EQ(fastsoftmax::describe(static_cast<const B*>(nullptr), nullptr, 5, 0).path, "empty");
}

TEST(TypedContract, BackwardRefusesNamingThePointer) {
  using H = __half;
  EXPECT_NE(refusal([] {
              fastsoftmax::softmax_backward(fake<H>(), static_cast<H*>(nullptr), fake<H>(4096), 2,
                                            8);
            }).find("dy is null"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              fastsoftmax::softmax_backward(fake<float>(), fake<float>(4096), fake<float>(8192 + 2),
                                            2, 8);
            }).find("dx is not 4-byte aligned"),
            std::string::npos);
  // dx overlapping y (not equal to it), and dx overlapping dy.
  const std::string y_overlap =
      refusal([] { fastsoftmax::softmax_backward(fake<H>(), fake<H>(4096), fake<H>(2), 2, 8); });
  EXPECT_NE(y_overlap.find("y and dx overlap"), std::string::npos) << y_overlap;
  const std::string dy_overlap = refusal(
      [] { fastsoftmax::softmax_backward(fake<H>(), fake<H>(4096), fake<H>(4096 + 6), 2, 8); });
  EXPECT_NE(dy_overlap.find("dy and dx overlap"), std::string::npos) << dy_overlap;
  EXPECT_NE(refusal([] {
              fastsoftmax::softmax_backward(fake<H>(), fake<H>(4096), fake<H>(8192), -1, 8);
            }).find("rows"),
            std::string::npos);
  EXPECT_EQ(refusal([] {
              fastsoftmax::softmax_backward(static_cast<float*>(nullptr), nullptr, nullptr, 3, 0);
            }),
            "");
}

}  // namespace
