// The logistic function of causal_conv1d's CUDA kernels (the fused SiLU and its derivative). The half types'
// results keep 8 or 11 bits, far above the error of the approximate exponential and reciprocal (2 and 1 ulp of a
// float); float and double take the exact ones.
#pragma once

namespace customops::cuda::causal_conv1d_math {

template <bool kFast>
__device__ __forceinline__ float sigmoid(float z) {
  if constexpr (kFast) {
    // ex2 and rcp with denormals flushed to zero: __expf's exponential without the flush takes three more
    // instructions (a compare and two predicated multiplies, seen in the SASS) in the forward's serial phase. The
    // flush changes no result: an exponential under 2^-126 adds nothing to 1, and a sigmoid under 2^-126 (z under
    // about -87) came out 0 from __fdividef as well.
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * -1.4426950408889634f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
    return r;
  } else {
    return 1.f / (1.f + ::expf(-z));
  }
}

template <bool kFast>
__device__ __forceinline__ double sigmoid(double z) {
  return 1.0 / (1.0 + ::exp(-z));
}

} // namespace customops::cuda::causal_conv1d_math
