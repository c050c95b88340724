// SPDX-License-Identifier: MIT
// fastsoftmax: a row as head, body and tail, so that every row length and alignment uses
// 16-byte accesses (docs/library.md, "How the plan was found": float4 for every N and offset
// took unaligned rows of 1K-12K columns from 0.43-0.80 of memcpy to 0.96-0.99, H100).
//
// A float4 access needs a 16-byte aligned address. Row r starts at x + r*N, which is 16-byte
// aligned only when x is and N % 4 == 0. Instead of falling back to 4-byte accesses for the whole
// row, each row is split at the 16-byte boundaries of memory:
//
//        16-byte boundaries:  |           |           |           |           |
//        memory (floats):     .  .  h  h  b  b  b  b  b  b  b  b  t  .  .  .
//                                   head  body (float4 slots 0, 1) tail
//
//   head: the floats before the row's first 16-byte boundary, 0..3 of them (all of a row too
//         short to reach one)
//   body: whole float4 slots from there, one 16-byte load and store each
//   tail: the 0..3 floats after the last whole slot
//
// A row of N floats has floor(N/4) body slots or one fewer, whatever its start, so a mapping sized
// for N/4 float4 per row serves every row. The head and the tail are read and written float by
// float by the first threads of the row's group, and held beside the body in registers (missing
// ones are -inf, which adds nothing to the max and exp(-inf - max) = 0 to the sum).
//
// x and y share the split when they share their alignment modulo 16 bytes (true of every
// allocator's buffers); the launcher checks, and sends other pairs to the 4-byte fallback, where
// the body is made of single floats (kVec = 1) and head and tail are empty.
#pragma once

#include <cstdint>
#include <type_traits>

namespace fastsoftmax::detail {

// Floats from the 16-byte boundary at or below p to p: 0..3. Every row's split follows from
// this number for the matrix and N % 4.
__device__ __forceinline__ int lead_of(const float* p) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(float) % 4);
}

// Row `row` of a rows x cols matrix whose first element lies `lead` floats past a 16-byte
// boundary, split as above. kVec = 1 (the 4-byte fallback): the whole row is body.
// kAligned: the launcher knows every row starts on a boundary and N % 4 == 0 (no head, no tail),
// so the split costs nothing.
template <int kVec, bool kAligned = false>
struct RowSplit {
  size_t start;  // the row's first element, counted from the matrix start
  int head;      // elements before the body
  int body;      // kVec-wide slots
  int tail_at;   // the first tail element: head + kVec * body
  int tail;      // elements after the body

  __device__ __forceinline__ RowSplit(int lead, int64_t row, int cols)
      : start(static_cast<size_t>(row) * cols) {
    if constexpr (kVec == 1 || kAligned) {
      head = 0;
      body = cols / kVec;
    } else {
      // The row starts (lead + row*N) % 4 floats past a boundary; 32-bit arithmetic modulo 4.
      const unsigned row_lead = (unsigned(lead) + unsigned(row) * unsigned(cols)) % 4;
      head = min(int((4 - row_lead) % 4), cols);
      body = (cols - head) / 4;
    }
    tail_at = head + kVec * body;
    tail = cols - tail_at;
  }

  // The body as kVec-wide items: slot s is body_of(m)[s].
  template <typename T>
  __device__ __forceinline__ auto body_of(T* m) const {
    if constexpr (kVec == 4) {
      using Vec = std::conditional_t<std::is_const_v<T>, const float4, float4>;
      return reinterpret_cast<Vec*>(m + start + head);
    } else {
      return m + start;
    }
  }
};

// Where a row's body goes in a shared-memory buffer at `buffer` (a 32-bit shared address): 0..7
// float4 past it, so that the body's address in shared memory and in global memory agree modulo
// 128 bytes. Then each 128-byte line of the row fills one 128-byte row of shared memory's banks
// instead of straddling two. An asynchronous copy (cp.async, cp.async.bulk) of a row that starts
// off a 128-byte line into a buffer that starts on one measured 1-5% slower on the H100
// (`smem_block` and `grid`); buffers sized for a row hold 8 float4 more.
__device__ __forceinline__ int line_shift(const float4* body, uint32_t buffer) {
  return static_cast<int>((reinterpret_cast<uintptr_t>(body) / sizeof(float4) -
                           buffer / sizeof(float4)) % 8);
}

// Which float4 of its 128-byte line p is: 0..7.
__device__ __forceinline__ int slot_in_line(const float4* p) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) / sizeof(float4) % 8);
}

// The slot of a run of kPacks * kThreads float4 slots that thread t takes in its k-th pack, where
// the run's first slot is `in_line` (0..7) float4 into its 128-byte line: t + k*kThreads -
// in_line, except that the first in_line threads of pack 0, which would fall before the run, take
// its last in_line slots. Then each warp's 32 slots fill whole 128-byte lines of memory (a run
// that starts or ends inside a line leaves one part-filled line at that end), where slot t + k *
// kThreads would start every warp's 512 bytes `in_line` float4 into a line: 16-byte accesses that
// touch 5 lines and, on stores, 17 part-filled 32-byte sectors instead of 16 (`cluster`:
// 2048x65539 from 0.932-0.934 to 0.943-0.946 of memcpy, H100; docs/library.md, "Long rows:
// clusters").
template <int kPacks, int kThreads>
__device__ __forceinline__ int lined_slot(int t, int k, int in_line) {
  const int s = t + k * kThreads - in_line;
  return k == 0 && s < 0 ? s + kPacks * kThreads : s;
}

// A body slot into registers, or -inf padding when `in_row` is false (nothing is read).
__device__ __forceinline__ void load_item(const float4* p, bool in_row, float (&v)[4]) {
  if (in_row) {
    const float4 t = *p;
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = -INFINITY;
  }
}
__device__ __forceinline__ void load_item(const float* p, bool in_row, float (&v)[1]) {
  v[0] = in_row ? *p : -INFINITY;
}
__device__ __forceinline__ void store_item(float4* p, const float (&v)[4]) {
  *p = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store_item(float* p, const float (&v)[1]) { *p = v[0]; }

// The head and tail elements a thread holds: element e = first + j*stride of each, for j <
// kEdges. With stride >= 3 one register each is enough (kEdges = 1); a group of 1 or 2 lanes
// needs 3 or 2.
template <int kEdges, int kVec, bool kAligned>
__device__ __forceinline__ void load_edges(const float* x, const RowSplit<kVec, kAligned>& r,
                                           int first, int stride, float (&head)[kEdges],
                                           float (&tail)[kEdges]) {
#pragma unroll
  for (int j = 0; j < kEdges; ++j) {
    const int e = first + j * stride;
    if constexpr (kVec == 1 || kAligned) {
      head[j] = tail[j] = -INFINITY;
      continue;
    }
    head[j] = e < r.head ? x[r.start + e] : -INFINITY;
    tail[j] = e < r.tail ? x[r.start + r.tail_at + e] : -INFINITY;
  }
}

template <int kEdges, int kVec, bool kAligned>
__device__ __forceinline__ void store_edges(float* y, const RowSplit<kVec, kAligned>& r, int first,
                                            int stride, const float (&head)[kEdges],
                                            const float (&tail)[kEdges]) {
#pragma unroll
  for (int j = 0; j < kEdges; ++j) {
    if constexpr (kVec == 1 || kAligned) return;
    const int e = first + j * stride;
    if (e < r.head) y[r.start + e] = head[j];
    if (e < r.tail) y[r.start + r.tail_at + e] = tail[j];
  }
}

}  // namespace fastsoftmax::detail
