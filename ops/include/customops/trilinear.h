#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

namespace customops {

// NeRF-style trilinear interpolation: feats (N, 8, F) holds each point's 8
// cube-corner features, points (N, 3) its local coordinates, nominally in
// [-1, 1]; returns (N, F). Corner k has bits (x, y, z) = (k>>2 & 1, k>>1 & 1,
// k & 1) and weight prod (bit ? t : 1 - t), t = (coordinate + 1) / 2, a
// formula that also extrapolates outside [-1, 1]. Differentiable in feats and
// points. Any of the four floating dtypes for each, CPU and CUDA: the result
// has feats' dtype and is computed in at::opmath_type of it (float for half
// types, so double points with float feats compute in float); points are
// read at their own precision, never rounded to a half type.
at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points);

// Gradients (d feats, d points) for the upstream gradient grad_out (N, F);
// output_mask says which to compute (the other is an undefined tensor).
std::tuple<at::Tensor, at::Tensor> trilinear_interpolation_backward(const at::Tensor& grad_out,
                                                                    const at::Tensor& feats,
                                                                    const at::Tensor& points,
                                                                    std::array<bool, 2> output_mask = {true, true});

} // namespace customops
