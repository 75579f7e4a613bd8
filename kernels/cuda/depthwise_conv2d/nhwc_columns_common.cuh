// Pieces the two 3x3 column kernel files share (nhwc_columns.cu, the
// correlations; nhwc_column_wgrad.cu, the weight gradient).
#pragma once

#include <ATen/OpMathType.h>

#include <cstdint>
#include <limits>

#include "kernels/cuda/common/launch.cuh"

namespace customops::cuda::depthwise_nhwc::columns::common {

constexpr int kK = 3;  // window height and width

// A thread's lanes: BYTES of a pixel.
template <typename scalar_t, int BYTES>
constexpr int lanes() {
  return BYTES / int(sizeof(scalar_t));
}

// Sizes the kernels index with int, with room for a few of them added.
inline bool fits_int(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int>::max() / 4;
}

// Each lane widened to the type sums are kept in.
template <typename scalar_t, int V>
__device__ __forceinline__ void widen(const launch::Pack<scalar_t, V>& pack, at::opmath_type<scalar_t> (&v)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = static_cast<at::opmath_type<scalar_t>>(pack.v[k]);
}

} // namespace customops::cuda::depthwise_nhwc::columns::common
