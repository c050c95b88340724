// SPDX-License-Identifier: MIT
// fastsoftmax: shared-memory addresses across a cluster, the 16-byte asynchronous copy and the bulk
// copy into shared memory, transaction barriers (mbarrier) and the relaxed cluster barrier, for
// every kernel that exchanges through distributed shared memory or stages a row there
// (split_exchange.cuh, split_parts.cuh, typed_rows.cuh). No device globals: a file may include this
// without taking any.
#pragma once

#include <cstdint>

namespace fastsoftmax::detail {

// The 32-bit shared-memory address of p in this CTA's window, and the same place in CTA `rank`'s.
__device__ __forceinline__ uint32_t shared_at(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint32_t in_cta(uint32_t at, int rank) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(rank));
  return remote;
}

// A 16-byte asynchronous copy from global memory to shared memory (cp.async.cg: through L2 only),
// to a shared-memory address (the 32-bit kind __cvta_generic_to_shared gives), issued only where
// `in_row`: a predicate, not a branch. Written out because __pipeline_memcpy_async behind an `if`
// made each copy a branch of its own, in which the compiler recomputed both full addresses: about
// 30 instructions a copy where this takes one or two.
__device__ __forceinline__ void copy16_async(uint32_t to, const void* from, bool in_row) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n"
      " @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(to),
      "l"(from), "r"(int(in_row))
      : "memory");
}

// A cluster-wide barrier without memory ordering. cluster.sync() arrives with release semantics:
// each thread first waits until its earlier stores (and copies) have landed, a MEMBAR stall of
// about 1.5 us a launch at the kernel's start and end, where nothing needs that ordering. Its two
// halves are also used apart, by a CTA with work to do between arriving and waiting (the small
// clusters).
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_barrier_relaxed() {
  cluster_arrive_relaxed();
  cluster_wait();
}

// Thread 0 sets up a CTA's two transaction barriers (one arrival each, by row parity) and makes
// the set-up visible to the cluster (fence.mbarrier_init); a cluster barrier must follow before
// any other CTA counts bytes on them.
__device__ __forceinline__ void init_row_barriers(unsigned long long (&arrived)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_at(&arrived[i]))
                   : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
#endif
}

// One thread's bulk copy of `bytes` (a multiple of 16, from a 16-byte aligned `from`) from global
// memory to the shared address `to`, counted off the transaction barrier at `barrier`: the thread
// arrives on it expecting the bytes, then issues the copy, whose landing completes the phase. With
// no bytes the arrival alone completes it.
__device__ __forceinline__ void bulk_copy_counted(uint32_t to, const void* from, uint32_t bytes,
                                                  uint32_t barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes)
               : "memory");
  if (bytes != 0)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(to), "l"(from), "r"(bytes), "r"(barrier)
        : "memory");
#endif
}

// Spins until the mbarrier at `barrier` has completed the phase of parity `phase`.
__device__ __forceinline__ void wait_parity(uint32_t barrier, uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred ready;\n mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
        " selp.u32 %0, 1, 0, ready;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(phase)
        : "memory");
  } while (!done);
#endif
}

}  // namespace fastsoftmax::detail
