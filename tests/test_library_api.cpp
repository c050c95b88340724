// SPDX-License-Identifier: MIT
// The library's public contract (fastsoftmax/include/fastsoftmax/softmax.h): arguments refused
// before anything is launched or written, empty matrices, in place, and the plan query. The
// paths themselves are verified by test_gpu.cpp (as the table's line "fastsoftmax") and forced
// one by one by test_library_paths.cpp.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/device_buffer.h"
#include "common/step_table.h"
#include "fastsoftmax/softmax.h"
#include "gpu_test.h"
#include "refusal.h"

namespace {

using softmax::testing::refusal;  // tests/refusal.h

// A stand-in address: the checks below refuse before any memory is touched.
float* fake(uintptr_t offset = 0) { return reinterpret_cast<float*>((uintptr_t(1) << 20) + offset); }

// Host-side checks: no GPU is involved before the arguments are refused.
TEST(LibraryContract, RefusesBadShapesNamingThem) {
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), fake(), -1, 8); }).find("rows"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), fake(), 8, -3); }).find("cols"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), fake(), int64_t(INT_MAX) + 1, 1); })
                .find("2^31 - 1"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), fake(), 1, int64_t(1) << 40); })
                .find("cols"),
            std::string::npos);
}

TEST(LibraryContract, RefusesBadPointersNamingThem) {
  EXPECT_NE(refusal([] { fastsoftmax::softmax(nullptr, fake(), 2, 8); }).find("x is null"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), nullptr, 2, 8); }).find("y is null"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(2), fake(), 2, 8); }).find("x is not 4-byte"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), fake(1), 2, 8); }).find("y is not 4-byte"),
            std::string::npos);
  // y starts inside x's 64 bytes (2 rows of 8 floats): refused; right after them: accepted by
  // the checks (describe then needs a GPU, so only the refusal is checked here).
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(), fake(60), 2, 8); }).find("overlap"),
            std::string::npos);
  EXPECT_NE(refusal([] { fastsoftmax::softmax(fake(60), fake(), 2, 8); }).find("overlap"),
            std::string::npos);
  EXPECT_NE(refusal([] { (void)fastsoftmax::describe(nullptr, fake(), 2, 8); }).find("null"),
            std::string::npos);
}

TEST(LibraryContract, EmptyMatrixIsANoOp) {
  // Null pointers are fine when there is nothing to do, and nothing touches a GPU.
  EXPECT_NO_THROW(fastsoftmax::softmax(nullptr, nullptr, 0, 100));
  EXPECT_NO_THROW(fastsoftmax::softmax(nullptr, nullptr, 100, 0));
  EXPECT_EQ(fastsoftmax::describe(nullptr, nullptr, 0, 0).path, "empty");
}

TEST(LibraryContract, VersionIsStated) {
  EXPECT_EQ(std::string(FASTSOFTMAX_VERSION),
            std::to_string(FASTSOFTMAX_VERSION_MAJOR) + "." +
                std::to_string(FASTSOFTMAX_VERSION_MINOR) + "." +
                std::to_string(FASTSOFTMAX_VERSION_PATCH));
}

class LibraryOnGpu : public softmax::testing::GpuTest<> {};

// A refused call writes nothing: the output keeps its poison.
TEST_F(LibraryOnGpu, RefusedCallWritesNothing) {
  const int rows = 64, cols = 1000;
  softmax::DeviceBuffer<float> buf(2 * size_t(rows) * cols);
  const std::vector<float> poison(buf.size(), 12345.f);
  CUDA_CHECK(cudaMemcpy(buf.get(), poison.data(), buf.size() * sizeof(float),
                        cudaMemcpyHostToDevice));
  float* x = buf.get();
  EXPECT_FALSE(refusal([&] { fastsoftmax::softmax(x, x + 10, rows, cols); }).empty());
  EXPECT_FALSE(refusal([&] { fastsoftmax::softmax(x, x + 2, rows, int64_t(INT_MAX) + 7); }).empty());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> after(buf.size());
  CUDA_CHECK(cudaMemcpy(after.data(), buf.get(), buf.size() * sizeof(float),
                        cudaMemcpyDeviceToHost));
  EXPECT_EQ(after, poison);
}

// The plan query names a path of docs/library.md's table, with its launch and its rule, and
// depends on alignment as well as on the shape.
TEST_F(LibraryOnGpu, DescribeNamesThePathAndWhy) {
  const std::set<std::string> paths = {"single",     "pairs",        "tiles", "sub_warp",
                                       "half_warp",  "strided",      "warp",  "block",
                                       "smem_block", "two_pass",     "two_pass_scalar",
                                       "cluster",    "cluster_held", "grid",  "grid_held"};
  const float* a = fake();
  struct Case {
    int64_t rows, cols;
  };
  for (const Case c : {Case{4096, 1}, Case{4096, 4096}, Case{4096, 100}, Case{8, 1048576},
                       Case{1, 9000001}, Case{65536, 127}, Case{2048, 65536}}) {
    const fastsoftmax::Plan p = fastsoftmax::describe(a, a, c.rows, c.cols);
    EXPECT_EQ(paths.count(p.path), 1u) << c.rows << "x" << c.cols << ": " << p.path;
    EXPECT_FALSE(p.config.empty()) << c.rows << "x" << c.cols;
    EXPECT_FALSE(p.why.empty()) << c.rows << "x" << c.cols;
    ::testing::Test::RecordProperty(std::to_string(c.rows) + "x" + std::to_string(c.cols),
                                    p.path + ": " + p.config);
  }
  EXPECT_EQ(fastsoftmax::describe(a, a, 100000, 1).path, "single");
  EXPECT_EQ(fastsoftmax::describe(a, a, 4096, 4096).path, "block");
  EXPECT_EQ(fastsoftmax::describe(a, a, 1, 9000001).path, "two_pass");
  // x and y 4 bytes apart in their 16-byte offsets (and far apart in memory): no float4 fits
  // both.
  const float* far = reinterpret_cast<const float*>((uintptr_t(1) << 40) + 4);
  EXPECT_EQ(fastsoftmax::describe(a, far, 4096, 4096).path, "two_pass_scalar");
  // Rows of two floats: two rows a float4 on an 8-byte boundary, not off it.
  EXPECT_EQ(fastsoftmax::describe(a, a, 100000, 2).path, "pairs");
  EXPECT_NE(fastsoftmax::describe(fake(4), fake(4), 100000, 2).path, "pairs");
  if (fastsoftmax::clusters_enabled())
    EXPECT_EQ(fastsoftmax::describe(a, a, 2048, 65536).path, "cluster");
  // y starting right after x's 64 bytes (2 rows of 8 floats) is no overlap; 4 bytes sooner is.
  EXPECT_NO_THROW((void)fastsoftmax::describe(a, fake(64), 2, 8));
  EXPECT_FALSE(refusal([&] { (void)fastsoftmax::describe(a, fake(60), 2, 8); }).empty());
  // Nothing was launched: a kernel run on these stand-in addresses would have faulted.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// On a GPU with clusters (sm_90 and later) a build for it uses them, unless turned off: the
// long-row tests skip without clusters, so a wrong "no" here would hide them.
TEST_F(LibraryOnGpu, ClustersOnWhereTheGpuHasThem) {
  int device = 0, major = 0, cluster_launch = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device));
  const char* off = std::getenv("FASTSOFTMAX_NO_CLUSTERS");
  if (major < 9 || !cluster_launch || (off != nullptr && std::string(off) != "" &&
                                       std::string(off) != "0"))
    GTEST_SKIP() << fastsoftmax::cluster_report();
  EXPECT_TRUE(fastsoftmax::clusters_enabled()) << fastsoftmax::cluster_report();
}

// In place (x == y) gives, bit for bit, what a separate output gives (which test_gpu.cpp
// verifies against the reference): the same plan runs, and every element is read before any of
// its row is written.
TEST_F(LibraryOnGpu, InPlaceMatchesSeparateOutput) {
  for (const int cols : {1, 2, 781, 4099, 70001}) {
    const int rows = 37;
    const size_t n = size_t(rows) * cols;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = float((i * 2654435761u) % 4001) / 200.f - 10.f;
    softmax::DeviceBuffer<float> a(n), b(n);
    CUDA_CHECK(cudaMemcpy(a.get(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(b.get(), 0, n * sizeof(float)));
    fastsoftmax::softmax(a.get(), b.get(), rows, cols);
    fastsoftmax::softmax(a.get(), a.get(), rows, cols);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> separate(n), in_place(n);
    CUDA_CHECK(cudaMemcpy(separate.data(), b.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(in_place.data(), a.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(in_place, separate) << rows << "x" << cols << " ("
                                  << fastsoftmax::describe(a.get(), a.get(), rows, cols).path
                                  << ")";
  }
}

}  // namespace
