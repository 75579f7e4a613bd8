// Inline-PTX pieces of the tensor-core kernels (sm_80 and later): cp.async copies into shared memory, ldmatrix
// loads of 8x8 b16 tiles, the m16n8k16 half-precision and m16n8k8 TF32 MMAs with float accumulators. The grouped,
// stem and TF32 weight-gradient conv2d kernels and the depthwise tensor-core kernel share them. Compiled for older
// GPUs they are empty: those kernels are not launched there.
#pragma once

#include <c10/util/Half.h>

#include <cstdint>
#include <type_traits>

namespace customops::cuda::sm80 {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Two 16-bit elements as one 32-bit fragment register (the first in the low half).
template <typename T>
struct alignas(4) Pair {
  T lo, hi;
};

// 16 bytes global -> shared, bypassing L1; zeros where !ok. Older GPUs load and store in turn (copies_done then
// has nothing to wait for), so that a kernel built on this copy alone also runs there.
__device__ __forceinline__ void copy16(void* dst, const void* src, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(ok ? 16 : 0));
#else
  *static_cast<uint4*>(dst) = ok ? *static_cast<const uint4*>(src) : uint4{};
#endif
}

// 8 bytes global -> shared (through L1: the .cg variant takes only 16); zeros where !ok.
__device__ __forceinline__ void copy8(void* dst, const void* src, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(ok ? 8 : 0));
#endif
}

__device__ __forceinline__ void copies_done() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void commit_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most kPending of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void copies_done_but() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Four 8x8 tiles from shared memory (kTrans: transposed), one register each.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                            uint32_t address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(address));
  }
#endif
}

template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  ldmatrix_x4<kTrans>(r[0], r[1], r[2], r[3], address);
}

// Two 8x8 tiles (threads 0-15 give the rows' addresses), one register each.
__device__ __forceinline__ void ldmatrix_x2(uint32_t& r0, uint32_t& r1, uint32_t address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(address));
#endif
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t& b0, uint32_t& b1, uint32_t address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b0), "=r"(b1)
               : "r"(address));
#endif
}

// 4 and 16 bytes from a shared-memory address (kernels that walk 32-bit addresses themselves).
__device__ __forceinline__ uint32_t load_shared(uint32_t address) {
  uint32_t v = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(address));
#endif
  return v;
}

__device__ __forceinline__ void load_shared(uint32_t (&v)[4], uint32_t address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(address));
#endif
}

// d += a (16x16, row-major fragments) * b (16x8, column-major), T c10::Half or c10::BFloat16.
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, c10::Half>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// float32 -> TF32 (10 mantissa bits), rounded to nearest with ties away from zero, as cuBLAS's TF32 GEMMs take
// float32 operands: the MMA itself would truncate the low bits. On the bits, branch-free: sm_90's cvt.rna.tf32.f32
// is a multi-instruction sequence with a branch for infinities and NaNs, which made it most of the TF32 stem input
// gradient's instructions. Infinities stay infinities, finite values round as cvt.rna rounds them (overflowing to
// an infinity past the largest TF32); a NaN whose payload lies only in the 13 dropped bits becomes an infinity, as
// the MMA's own truncation would make it.
__device__ __forceinline__ uint32_t to_tf32(float f) {
  return (__float_as_uint(f) + 0x1000u) & 0xffffe000u;
}

// to_tf32 for a register that only feeds TF32 MMAs, which read the top 19 bits: the half-ulp add alone (ptxas
// drops to_tf32's mask itself where it can see every use, not where a value crosses a branch).
__device__ __forceinline__ uint32_t tf32_operand(uint32_t bits) {
  return bits + 0x1000u;
}

// An A fragment's registers, loaded as they are from memory the kernel did not round (cp.async copies), rounded
// for the TF32 MMAs they feed (tf32_operand: the same operands as to_tf32's).
__device__ __forceinline__ void round_tf32(uint32_t (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = tf32_operand(a[i]);
}

// d += a (16x8 TF32, row-major fragments) * b (8x8, column-major), float32 accumulators. Not volatile: the
// compiler may move it among the fragment loads.
__device__ __forceinline__ void mma_16x8x8_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

} // namespace customops::cuda::sm80
