#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/trilinear.cpp) call the ops through them.
namespace customops::detail {

using TrilinearSignature = at::Tensor(const at::Tensor&, const at::Tensor&);
using TrilinearGrads = std::tuple<at::Tensor, at::Tensor>;
using TrilinearBackwardSignature = TrilinearGrads(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                  std::array<bool, 2>);

inline const c10::TypedOperatorHandle<TrilinearSignature>& trilinear_interpolation_op() {
  static const auto op = find_op<TrilinearSignature>("customops::trilinear_interpolation");
  return op;
}

inline const c10::TypedOperatorHandle<TrilinearBackwardSignature>& trilinear_interpolation_backward_op() {
  static const auto op = find_op<TrilinearBackwardSignature>("customops::trilinear_interpolation_backward");
  return op;
}

} // namespace customops::detail

namespace customops {

// scaffold: what the op computes, its arguments and dtypes |
// NeRF-style trilinear interpolation: feats (N, 8, F) holds each point's 8
// cube-corner features, points (N, 3) its local coordinates, nominally in
// [-1, 1]; returns (N, F). Corner k has bits (x, y, z) = (k>>2 & 1, k>>1 & 1,
// k & 1) and weight prod (bit ? t : 1 - t), t = (coordinate + 1) / 2, a
// formula that also extrapolates outside [-1, 1]. Differentiable in feats and
// points. Any of the four floating dtypes for each, CPU and CUDA: the result
// has feats' dtype and is computed in at::opmath_type of it (float for half
// types, so double points with float feats compute in float); points are
// read at their own precision, never rounded to a half type.
// scaffold-end
inline at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points) {
  return detail::trilinear_interpolation_op().call(feats, points);
}

// Gradients (d feats, d points) for the upstream gradient grad_out (N, F);
// output_mask says which to compute (the other is an undefined tensor).
inline std::tuple<at::Tensor, at::Tensor> trilinear_interpolation_backward(
    const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
    std::array<bool, 2> output_mask = {true, true}) {
  return detail::trilinear_interpolation_backward_op().call(grad_out, feats, points, output_mask);
}

} // namespace customops
