// scaffold: what the family computes |
// trilinear_interpolation: NeRF-style blending of a point's 8 cube-corner
// features. Corner k has bits (x, y, z) = (k>>2 & 1, k>>1 & 1, k & 1) and
// weight prod over axes of (bit ? t : 1 - t), t = (coordinate + 1) / 2.
// Coordinates outside [-1, 1] use the same formula (extrapolation).
// scaffold-end
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <array>
#include <tuple>
#include <type_traits>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"
// scaffold-if executorch
#include "kernels/core/trilinear.h"
// scaffold-end

namespace customops {

namespace trilinear {

using Grads = std::tuple<at::Tensor, at::Tensor>;

// Dtypes. feats and points may have different floating dtypes. The output,
// grad_out and grad_feats have feats' dtype: feats are the values being
// interpolated and the bulk of the memory traffic. Everything is computed in
// opmath of feats' dtype (float for half types, else feats' own dtype), so
// double points with float feats compute in float. Points are never rounded
// to a half type: a half coordinate keeps ~3 digits, which visibly moves the
// weights. grad_points has points' dtype.

// Checks shared by every backend (feats (N, 8, F), points (N, 3), floating,
// one device); grad_out, when given, must be (N, F) of feats' dtype.
inline void check(const char* op, const at::Tensor& feats, const at::Tensor& points) {
  checks::floating(op, "feats", feats);
  checks::floating(op, "points", points);
  // scaffold: the arguments' shapes (and any argument checks of the op's own) |
  TORCH_CHECK(feats.dim() == 3 && checks::holds(feats.sym_size(1) == kCorners), "customops::", op,
              ": expected feats of shape (N, 8, F), got ", feats.sym_sizes());
  TORCH_CHECK(points.dim() == 2 && checks::holds(points.sym_size(1) == 3), "customops::", op,
              ": expected points of shape (N, 3), got ", points.sym_sizes());
  TORCH_CHECK(checks::holds(feats.sym_size(0) == points.sym_size(0)), "customops::", op,
              ": expected feats and points to have the same N, got ", feats.sym_size(0), " and ",
              points.sym_size(0));
  // scaffold-end
  checks::same_device(op, "points", points, "feats", feats);
  checks::dense_fits(op, "feats", feats);
  checks::dense_fits(op, "points", points);
}

inline void check_grad_out(const at::Tensor& grad_out, const at::Tensor& feats) {
  const char* op = "trilinear_interpolation_backward";
  checks::floating(op, "grad_out", grad_out);
  // scaffold: grad_out's shape |
  TORCH_CHECK(grad_out.dim() == 2 && checks::holds(grad_out.sym_size(0) == feats.sym_size(0)) &&
                  checks::holds(grad_out.sym_size(1) == feats.sym_size(2)),
              "customops::", op, ": expected grad_out of shape (N, F) = [", feats.sym_size(0), ", ",
              feats.sym_size(2), "], got ", grad_out.sym_sizes());
  // scaffold-end
  checks::same_dtype(op, "grad_out", grad_out, "feats", feats);
  checks::same_device(op, "grad_out", grad_out, "feats", feats);
  checks::dense_fits(op, "grad_out", grad_out);
}

// What a CPU or CUDA kernel needs once the arguments are checked: contiguous
// inputs and the results allocated (only those output_mask asks for).
// points (and grad_points) hold either feats' dtype, the same-dtype case
// read as is, or opmath of feats' dtype: a points tensor of any other dtype
// is converted (N x 3 values, small next to feats' N x 8 x F), so the kernels
// read points as scalar_t or opmath_t only (see with_point_type).
struct Plan {
  at::Tensor grad, feats, points;    // grad only for the backward
  at::Tensor out, grad_feats, grad_points;
  int64_t N, F;
  at::ScalarType points_dtype;       // the caller's, which grad_points must have

  // (grad_feats, grad_points), grad_points in the caller's points dtype.
  Grads result() const {
    if (!grad_points.defined() || grad_points.scalar_type() == points_dtype) return {grad_feats, grad_points};
    return {grad_feats, grad_points.to(points_dtype)};
  }
};

// points, contiguous, in a dtype the kernels read (see Plan).
inline at::Tensor kernel_points(const at::Tensor& feats, const at::Tensor& points) {
  const auto dtype = feats.scalar_type();
  if (points.scalar_type() == dtype) return points.contiguous();
  // Not to(..., MemoryFormat::Contiguous): that returns points of the target
  // dtype as they are, transposed ones included.
  return points.to(at::toOpMathType(dtype)).contiguous();
}

inline Plan plan_forward(const at::Tensor& feats, const at::Tensor& points) {
  check("trilinear_interpolation", feats, points);
  Plan p;
  p.feats = feats.contiguous();
  p.points = kernel_points(feats, points);
  p.points_dtype = points.scalar_type();
  // scaffold: the result's sizes, allocated | p.out = at::empty({0}, feats.options());  // TODO(trilinear_interpolation)
  p.N = feats.size(0);
  p.F = feats.size(2);
  p.out = at::empty({p.N, p.F}, feats.options());
  // scaffold-end
  return p;
}

inline Plan plan_backward(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                          std::array<bool, 2> output_mask) {
  check("trilinear_interpolation_backward", feats, points);
  check_grad_out(grad_out, feats);
  Plan p;
  p.grad = grad_out.contiguous();
  p.feats = feats.contiguous();
  p.points = kernel_points(feats, points);
  p.points_dtype = points.scalar_type();
  // scaffold: the gradients' sizes, allocated as output_mask asks |
  p.N = feats.size(0);
  p.F = feats.size(2);
  if (output_mask[0]) p.grad_feats = at::empty({p.N, kCorners, p.F}, feats.options());
  // In the kernels' points dtype; result() converts it to the caller's.
  if (output_mask[1]) p.grad_points = at::empty({p.N, 3}, p.points.options());
  // scaffold-end
  return p;
}

// Calls fn(point_t{}) with the type the kernels read the plan's points as:
// scalar_t (feats' type) when points have feats' dtype, else opmath_t. For
// float and double feats both are one type, so only half types get a second
// instantiation, and the same-dtype kernels are the ones there were before.
template <typename scalar_t, typename Fn>
void with_point_type(const at::Tensor& points, const Fn& fn) {
  using opmath_t = at::opmath_type<scalar_t>;
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    TORCH_INTERNAL_ASSERT(points.scalar_type() == c10::CppTypeToScalarType<scalar_t>::value);
    fn(scalar_t{});
  } else if (points.scalar_type() == c10::CppTypeToScalarType<scalar_t>::value) {
    fn(scalar_t{});
  } else {
    TORCH_INTERNAL_ASSERT(points.scalar_type() == c10::CppTypeToScalarType<opmath_t>::value);
    fn(opmath_t{});
  }
}

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
