// SPDX-License-Identifier: MIT
// fastsoftmax, host side of typed_rows.cuh: which mapping a 16-bit forward or any backward takes
// (docs/library.md, "Other dtypes and the backward pass"), and its launch. Included once per dtype
// (typed_f32.cu, typed_f16.cu, typed_bf16.cu) so the dtypes compile in parallel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "check.h"
#include "launch.cuh"
#include "plan_record.h"
#include "typed_rows.cuh"

namespace fastsoftmax::detail {

template <typename T>
const char* dtype_name();
template <>
inline const char* dtype_name<float>() {
  return "float32";
}
template <>
inline const char* dtype_name<__half>() {
  return "float16";
}
template <>
inline const char* dtype_name<__nv_bfloat16>() {
  return "bfloat16";
}

// Values a thread holds a stream, in a block a row: 32 for the forward (one stream), 16 each for
// y and dy in the backward. About 24 registers more for addresses and sums keep a block of 1024
// under the 64 registers a thread that it may use.
constexpr int typed_block_values(bool backward) { return backward ? 16 : 32; }

template <typename T, int kVec, int kThreads, int kPacks, bool kBackward>
void launch_typed_rows(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  constexpr int kBlock = typed_block_threads<kThreads>();
  constexpr int kRowsPerBlock = kBlock / kThreads;
  const int64_t needed = (int64_t(rows) + kRowsPerBlock - 1) / kRowsPerBlock;
  // Groups: persistent, at most 16 blocks of 128 an SM (enough to fill it). Blocks: one a row.
  const int64_t cap = kThreads <= kWarpSize ? int64_t(device_info().sms) * 16 : int64_t(INT32_MAX);
  const int64_t blocks = std::min(needed, cap);
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") + ", " +
                std::to_string(kThreads) + " threads a row, " + std::to_string(kPacks) +
                " packs of " + std::to_string(kVec) + " a thread");
  }
  if (recorded(blocks, kBlock)) return;
  typed_rows_kernel<T, kVec, kThreads, kPacks, kBackward>
      <<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(a, b, out, rows, cols);
  FS_CHECK_LAUNCH();
}

template <typename T, int kVec, bool kBackward>
void launch_typed_two_pass(const T* a, const T* b, T* out, int rows, int cols,
                           cudaStream_t stream) {
  if (recording()) {
    name_kernel(std::string(dtype_name<T>()) + (kBackward ? " backward" : " forward") +
                ", a block a row, packs of " + std::to_string(kVec));
  }
  if (recorded(rows, kTypedTwoPassThreads)) return;
  typed_two_pass_kernel<T, kVec, kBackward>
      <<<static_cast<unsigned>(rows), kTypedTwoPassThreads, 0, stream>>>(a, b, out, rows, cols);
  FS_CHECK_LAUNCH();
}

// The in-register mappings for one pack width: a group of 1-32 lanes with one pack a lane, 32
// lanes with two or four, then blocks of 128-1024 threads; past what a block of 1024 holds, two
// passes. kVec == 1 (pointers at different offsets from 16 bytes) starts at 32 lanes.
template <typename T, int kVec, bool kBackward>
void launch_typed_for(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  const int64_t packs = (int64_t(cols) + kVec - 1) / kVec;  // at least the body's packs
  constexpr int kBlockPacks = typed_block_values(kBackward) / kVec;
  const char* kGroupWhy =
      "rows of at most 32 packs: a group of lanes a row, one pack a lane, "
      "the row in registers";
  const char* kWarpWhy = "rows of 33-128 packs: a warp a row, two or four packs a lane";
  const char* kBlockWhy = "rows a block of 128-1024 threads holds in registers: a block a row";
  if constexpr (kVec > 1) {
    if (packs <= 32) {
      note("typed_group", kGroupWhy);
      if (packs <= 1)
        return launch_typed_rows<T, kVec, 1, 1, kBackward>(a, b, out, rows, cols, stream);
      if (packs <= 2)
        return launch_typed_rows<T, kVec, 2, 1, kBackward>(a, b, out, rows, cols, stream);
      if (packs <= 4)
        return launch_typed_rows<T, kVec, 4, 1, kBackward>(a, b, out, rows, cols, stream);
      if (packs <= 8)
        return launch_typed_rows<T, kVec, 8, 1, kBackward>(a, b, out, rows, cols, stream);
      if (packs <= 16)
        return launch_typed_rows<T, kVec, 16, 1, kBackward>(a, b, out, rows, cols, stream);
      return launch_typed_rows<T, kVec, 32, 1, kBackward>(a, b, out, rows, cols, stream);
    }
  } else if (packs <= 32) {
    note("typed_group", kGroupWhy);
    return launch_typed_rows<T, kVec, 32, 1, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 64) {
    note("typed_warp", kWarpWhy);
    return launch_typed_rows<T, kVec, 32, 2, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 128) {
    note("typed_warp", kWarpWhy);
    return launch_typed_rows<T, kVec, 32, 4, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 128 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, kVec, 128, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 256 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, kVec, 256, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 512 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, kVec, 512, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  if (packs <= 1024 * kBlockPacks) {
    note("typed_block", kBlockWhy);
    return launch_typed_rows<T, kVec, 1024, kBlockPacks, kBackward>(a, b, out, rows, cols, stream);
  }
  note("typed_two_pass",
       "rows longer than a block of 1024 holds in registers: a block a row, "
       "the row read twice");
  return launch_typed_two_pass<T, kVec, kBackward>(a, b, out, rows, cols, stream);
}

// Every pointer of the call shares its offset from a 16-byte boundary: 16-byte packs; otherwise
// one element an access.
template <typename T, bool kBackward>
void launch_typed(const T* a, const T* b, T* out, int rows, int cols, cudaStream_t stream) {
  const auto ua = reinterpret_cast<uintptr_t>(a), ub = reinterpret_cast<uintptr_t>(b),
             uo = reinterpret_cast<uintptr_t>(out);
  const bool shared = (ua - uo) % 16 == 0 && (!kBackward || (ua - ub) % 16 == 0);
  if (shared) {
    return launch_typed_for<T, 16 / int(sizeof(T)), kBackward>(a, b, out, rows, cols, stream);
  }
  launch_typed_for<T, 1, kBackward>(a, b, out, rows, cols, stream);
  if (Plan* p = recording()) {
    p->why +=
        " (the pointers do not share their offset from a 16-byte boundary: one element an "
        "access)";
  }
}

}  // namespace fastsoftmax::detail
