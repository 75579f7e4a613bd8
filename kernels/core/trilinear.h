// trilinear_interpolation's maths on raw pointers, shared by libtorch's kernels (kernels/cpu/trilinear.cpp,
// kernels/cuda/trilinear/) and ExecuTorch's (kernels/executorch/trilinear.cpp): one formula, every runtime.
#pragma once

#include <cstdint>

#include "kernels/core/host_device.h"

namespace customops::trilinear {
// Internal linkage: the CPU kernels compile this once per instruction set (kernels/cpu/), and one shared
// symbol would let the linker keep any one of those copies for every caller.
namespace {

// scaffold: the scalar formulas the kernels share |
constexpr int kCorners = 8;

// A point's corner weights and their derivatives in its 3 coordinates, each
// computed where it is used (the forward needs no derivatives).
template <typename T>
struct Corners {
  T t[3];  // (coordinate + 1) / 2

  CUSTOMOPS_HOST_DEVICE Corners(T x, T y, T z) : t{(x + T(1)) * T(0.5), (y + T(1)) * T(0.5), (z + T(1)) * T(0.5)} {}

  // Factor of corner k along axis d.
  CUSTOMOPS_HOST_DEVICE T factor(int k, int d) const {
    return (k >> (2 - d)) & 1 ? t[d] : T(1) - t[d];
  }
  CUSTOMOPS_HOST_DEVICE T weight(int k) const {
    return factor(k, 0) * factor(k, 1) * factor(k, 2);
  }
  // d weight(k) / d coordinate d (the 1/2 is dt/dcoordinate).
  CUSTOMOPS_HOST_DEVICE T derivative(int k, int d) const {
    const T sign = (k >> (2 - d)) & 1 ? T(0.5) : T(-0.5);
    return sign * factor(k, (d + 1) % 3) * factor(k, (d + 2) % 3);
  }
};
// scaffold-end

// scaffold: the CPU forward over a range of rows, on contiguous buffers |
// The forward of points [begin, end): feats (N, 8, F), points (N, 3), out (N, F), contiguous. acc holds F values
// of the accumulation type (opmath_t: float for the half types), the caller's, so that a task allocates it once.
template <typename scalar_t, typename point_t, typename opmath_t>
void forward_rows(const scalar_t* feats, const point_t* points, scalar_t* out, int64_t F, int64_t begin,
                  int64_t end, opmath_t* acc) {
  for (int64_t n = begin; n < end; ++n) {
    const point_t* p = points + 3 * n;
    const Corners<opmath_t> c(static_cast<opmath_t>(p[0]), static_cast<opmath_t>(p[1]),
                              static_cast<opmath_t>(p[2]));
    const scalar_t* corner = feats + n * kCorners * F;
    // Corner by corner, so that each loop over F vectorises.
    const opmath_t w0 = c.weight(0);
    for (int64_t j = 0; j < F; ++j) acc[j] = w0 * static_cast<opmath_t>(corner[j]);
    for (int k = 1; k < kCorners; ++k) {
      const opmath_t w = c.weight(k);
      const scalar_t* row = corner + k * F;
      for (int64_t j = 0; j < F; ++j) acc[j] += w * static_cast<opmath_t>(row[j]);
    }
    scalar_t* o = out + n * F;
    for (int64_t j = 0; j < F; ++j) o[j] = static_cast<scalar_t>(acc[j]);
  }
}
// scaffold-end

} // namespace
} // namespace customops::trilinear
