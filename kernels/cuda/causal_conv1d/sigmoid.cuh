// The logistic function of causal_conv1d's CUDA kernels (the fused SiLU and its derivative). The half types'
// results keep 8 or 11 bits, far under the fast exponential's and division's error; float and double take the
// exact ones.
#pragma once

namespace customops::cuda::causal_conv1d_math {

template <bool kFast>
__device__ __forceinline__ float sigmoid(float z) {
  if constexpr (kFast) {
    return __fdividef(1.f, 1.f + __expf(-z));
  } else {
    return 1.f / (1.f + ::expf(-z));
  }
}

template <bool kFast>
__device__ __forceinline__ double sigmoid(double z) {
  return 1.0 / (1.0 + ::exp(-z));
}

} // namespace customops::cuda::causal_conv1d_math
