// SPDX-License-Identifier: MIT
// step07_tiles: step07's path (a') (tiles of rows through shared memory) forced, beside path (a)
// forced and step07's own choice, on unaligned short rows: the measurements of change 17 in
// docs/notes/step07.md (which path serves which matrices, and how many lanes a row in a tile).
//
//   build/softmax_step07_tiles [--iters K]
//
// For each shape (M = 1024 ... 262144, N = 17 ... 131, all N % 4 != 0, so rows leave 16-byte
// boundaries): verification of each variant (two input kinds, x and y at offsets 0, 1 and 3
// floats, at most 700 rows), then the median of K launches with L2 flushed, memcpy timed
// interleaved: the ratio to memcpy of step07, of path (a) and of tiles with the lane count
// step07 uses (tile_group) and, for N <= 32, 4 lanes.
// Exit codes: 0 ok, 1 a verification or CUDA failure, 2 bad usage, 77 no GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/cuda_check.h"
#include "common/device.h"
#include "common/program.h"
#include "common/softmax.h"
#include "common/step_table.h"
#include "common/timer.h"
#include "common/verify.h"
#include "step07_persistent/launch.cuh"
#include "step07_persistent/tile_rows.cuh"
#include "step07_persistent/warp_rows.cuh"

namespace {

using namespace step07_persistent;

int g_group = 0;  // lanes a row of the forced tile launch

template <int kGroup, int kPerLane>
void tiles(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  const int per_tile = tile_rows(cols, kGroup);
  const int64_t count = (int64_t(rows) + per_tile - 1) / per_tile;
  tile_rows_kernel<kGroup, kPerLane><<<static_cast<unsigned>(count), kTileThreads, 0, stream>>>(
      x, y, rows, cols, per_tile);
}

// kPerLane = ceil(N / kGroup), as the kernel requires.
template <int kGroup, int kPerLane = 1>
void tiles_any(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  if constexpr (kPerLane > 16) {
    throw std::invalid_argument("step07_tiles: more than 16 floats a lane");
  } else if ((cols + kGroup - 1) / kGroup == kPerLane) {
    tiles<kGroup, kPerLane>(x, y, rows, cols, stream);
  } else {
    tiles_any<kGroup, kPerLane + 1>(x, y, rows, cols, stream);
  }
}

void forced_tiles(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step07_tiles", x, y, rows, cols, 131);
  switch (g_group) {
    case 2: tiles_any<2>(x, y, rows, cols, stream); break;
    case 4: tiles_any<4>(x, y, rows, cols, stream); break;
    case 8: tiles_any<8>(x, y, rows, cols, stream); break;
    default: tiles_any<16>(x, y, rows, cols, stream); break;
  }
  CUDA_CHECK_LAUNCH();
}

// Path (a) as step07 launches it for unaligned rows of one float4 slot a lane.
template <int kGroup>
void path_a(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kWarpThreads / kGroup;
  const int64_t blocks = (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
  const auto one_row = warp_rows_kernel<kGroup, 1, false, false>;
  const int64_t resident =
      int64_t(device_info().sms) * std::max(1, blocks_per_sm(one_row, kWarpThreads, 0));
  if (2 * blocks >= 3 * resident) {
    one_row<<<static_cast<unsigned>(blocks), kWarpThreads, 0, stream>>>(x, y, rows, cols);
    CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr bool kNext = kGroup == kWarpSize;
  launch_persistent(warp_rows_kernel<kGroup, 1, kNext, false>, kWarpThreads, 0, blocks, x, y,
                    rows, cols, stream, kNext ? 2 : 1);
}

void forced_a(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  softmax::check_launch_args("step07_tiles", x, y, rows, cols, 131);
  const int slots = cols / 4;
  if (slots <= 4) return path_a<4>(x, y, rows, cols, stream);
  if (slots <= 8) return path_a<8>(x, y, rows, cols, stream);
  if (slots <= 16) return path_a<16>(x, y, rows, cols, stream);
  path_a<32>(x, y, rows, cols, stream);
}

int up_to_131() { return 131; }
softmax::Traffic ideal(int) { return softmax::kIdealTraffic; }

}  // namespace

int main(int argc, char** argv) {
  int iters = 30;
  try {
    if (argc == 3 && std::string(argv[1]) == "--iters")
      iters = softmax::parse_int("--iters", argv[2], softmax::kMinRuns);
    else if (argc != 1)
      throw softmax::UsageError("unexpected arguments");
  } catch (const softmax::UsageError& e) {
    std::fprintf(stderr, "%s\nusage: %s [--iters K]\n", e.what(), argv[0]);
    return 2;
  }
  if (!softmax::require_gpu(argv[0])) return softmax::kExitNoGpu;
  std::printf("%s\n", softmax::query_device().summary().c_str());
  const softmax::Step* step07 = softmax::find_step("step07_persistent");
  const softmax::Step tile{"tiles", "path (a') forced", forced_tiles, up_to_131, ideal};
  const softmax::Step lanes{"path_a", "path (a) forced", forced_a, up_to_131, ideal};
  int failed = 0;
  try {
    softmax::TimingBuffers buf(size_t(262144) * 131);
    softmax::Timer timer;
    std::printf("%8s %5s %-12s %8s %7s  %s\n", "rows", "cols", "variant", "us", "ratio",
                "verified");
    for (int rows : {1024, 2048, 4096, 8192, 16384, 32768, 65536, 262144}) {
      for (int cols : {17, 23, 31, 33, 45, 61, 97, 127, 131}) {
        const int group = tile_group(cols);
        struct Variant {
          const softmax::Step* step;
          int group;
          std::string name;
        };
        std::vector<Variant> variants = {{step07, 0, "step07"},
                                         {&lanes, 0, "path (a)"},
                                         {&tile, group, "tiles G=" + std::to_string(group)}};
        if (cols <= 32) variants.push_back({&tile, 4, "tiles G=4"});
        for (const Variant& v : variants) {
          g_group = v.group;
          softmax::VerifyResult r;
          for (auto kind : {softmax::InputKind::kNormal, softmax::InputKind::kMaxAtEnds}) {
            for (int offset : {0, 1, 3}) {
              r = softmax::check_step(*v.step, std::min(rows, 700), cols, kind, 7 + cols,
                                      {offset, offset});
              if (!r.ok()) break;
            }
            if (!r.ok()) break;
          }
          if (!r.ok()) ++failed;
          const softmax::Measurement m =
              softmax::measure(*v.step, timer, buf, rows, cols, iters);
          std::printf("%8d %5d %-12s %8.2f %7.3f  %s\n", rows, cols, v.name.c_str(),
                      m.kernel.median_ms * 1e3, m.ratio, r.ok() ? "ok" : r.report().c_str());
          std::fflush(stdout);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step07_tiles: %s\n", e.what());
    return 1;
  }
  return failed ? 1 : 0;
}
