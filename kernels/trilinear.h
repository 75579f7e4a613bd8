// trilinear_interpolation: NeRF-style blending of a point's 8 cube-corner
// features. Corner k has bits (x, y, z) = (k>>2 & 1, k>>1 & 1, k & 1) and
// weight prod over axes of (bit ? t : 1 - t), t = (coordinate + 1) / 2.
// Coordinates outside [-1, 1] use the same formula (extrapolation).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <array>
#include <tuple>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"

namespace customops {

namespace trilinear {

constexpr int kCorners = 8;

// A point's corner weights and their derivatives in its 3 coordinates, each
// computed where it is used (the forward needs no derivatives).
template <typename T>
struct Corners {
  T t[3];  // (coordinate + 1) / 2

  C10_HOST_DEVICE Corners(T x, T y, T z) : t{(x + T(1)) * T(0.5), (y + T(1)) * T(0.5), (z + T(1)) * T(0.5)} {}

  // Factor of corner k along axis d.
  C10_HOST_DEVICE T factor(int k, int d) const {
    return (k >> (2 - d)) & 1 ? t[d] : T(1) - t[d];
  }
  C10_HOST_DEVICE T weight(int k) const {
    return factor(k, 0) * factor(k, 1) * factor(k, 2);
  }
  // d weight(k) / d coordinate d (the 1/2 is dt/dcoordinate).
  C10_HOST_DEVICE T derivative(int k, int d) const {
    const T sign = (k >> (2 - d)) & 1 ? T(0.5) : T(-0.5);
    return sign * factor(k, (d + 1) % 3) * factor(k, (d + 2) % 3);
  }
};

using Grads = std::tuple<at::Tensor, at::Tensor>;

// Checks shared by every backend (feats (N, 8, F), points (N, 3), one dtype
// and device); grad_out, when given, must be (N, F).
void check(const char* op, const at::Tensor& feats, const at::Tensor& points);
void check_grad_out(const at::Tensor& grad_out, const at::Tensor& feats);

// What a CPU or CUDA kernel needs once the arguments are checked: contiguous
// inputs and the results allocated (only those output_mask asks for).
struct Plan {
  at::Tensor grad, feats, points;    // grad only for the backward
  at::Tensor out, grad_feats, grad_points;
  int64_t N, F;
};
Plan plan_forward(const at::Tensor& feats, const at::Tensor& points);
Plan plan_backward(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                   std::array<bool, 2> output_mask);

} // namespace trilinear

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points);
    trilinear::Grads trilinear_interpolation_backward(const at::Tensor& grad_out, const at::Tensor& feats,
                                                      const at::Tensor& points, std::array<bool, 2> output_mask);)
} // namespace cpu

namespace cuda {
at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points);
trilinear::Grads trilinear_interpolation_backward(const at::Tensor& grad_out, const at::Tensor& feats,
                                                  const at::Tensor& points, std::array<bool, 2> output_mask);
} // namespace cuda

namespace meta {
at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points);
trilinear::Grads trilinear_interpolation_backward(const at::Tensor& grad_out, const at::Tensor& feats,
                                                  const at::Tensor& points, std::array<bool, 2> output_mask);
} // namespace meta

} // namespace customops
