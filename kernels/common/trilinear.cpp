#include "kernels/trilinear.h"

#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>

namespace customops::trilinear {

void check(const char* op, const at::Tensor& feats, const at::Tensor& points) {
  checks::floating(op, "feats", feats);
  checks::floating(op, "points", points);
  TORCH_CHECK(feats.dim() == 3 && checks::holds(feats.sym_size(1) == kCorners), "customops::", op,
              ": expected feats of shape (N, 8, F), got ", feats.sym_sizes());
  TORCH_CHECK(points.dim() == 2 && checks::holds(points.sym_size(1) == 3), "customops::", op,
              ": expected points of shape (N, 3), got ", points.sym_sizes());
  TORCH_CHECK(checks::holds(feats.sym_size(0) == points.sym_size(0)), "customops::", op,
              ": expected feats and points to have the same N, got ", feats.sym_size(0), " and ",
              points.sym_size(0));
  checks::same_device(op, "points", points, "feats", feats);
  checks::dense_fits(op, "feats", feats);
  checks::dense_fits(op, "points", points);
}

void check_grad_out(const at::Tensor& grad_out, const at::Tensor& feats) {
  const char* op = "trilinear_interpolation_backward";
  checks::floating(op, "grad_out", grad_out);
  TORCH_CHECK(grad_out.dim() == 2 && checks::holds(grad_out.sym_size(0) == feats.sym_size(0)) &&
                  checks::holds(grad_out.sym_size(1) == feats.sym_size(2)),
              "customops::", op, ": expected grad_out of shape (N, F) = [", feats.sym_size(0), ", ",
              feats.sym_size(2), "], got ", grad_out.sym_sizes());
  checks::same_dtype(op, "grad_out", grad_out, "feats", feats);
  checks::same_device(op, "grad_out", grad_out, "feats", feats);
  checks::dense_fits(op, "grad_out", grad_out);
}

namespace {

// points, contiguous, in a dtype the kernels read (see Plan).
at::Tensor kernel_points(const at::Tensor& feats, const at::Tensor& points) {
  const auto dtype = feats.scalar_type();
  if (points.scalar_type() == dtype) return points.contiguous();
  // Not to(..., MemoryFormat::Contiguous): that returns points of the target
  // dtype as they are, transposed ones included.
  return points.to(at::toOpMathType(dtype)).contiguous();
}

} // namespace

Grads Plan::result() const {
  if (!grad_points.defined() || grad_points.scalar_type() == points_dtype) return {grad_feats, grad_points};
  return {grad_feats, grad_points.to(points_dtype)};
}

Plan plan_forward(const at::Tensor& feats, const at::Tensor& points) {
  check("trilinear_interpolation", feats, points);
  Plan p;
  p.feats = feats.contiguous();
  p.points = kernel_points(feats, points);
  p.points_dtype = points.scalar_type();
  p.N = feats.size(0);
  p.F = feats.size(2);
  p.out = at::empty({p.N, p.F}, feats.options());
  return p;
}

Plan plan_backward(const at::Tensor& grad_out, const at::Tensor& feats, const at::Tensor& points,
                   std::array<bool, 2> output_mask) {
  check("trilinear_interpolation_backward", feats, points);
  check_grad_out(grad_out, feats);
  Plan p;
  p.grad = grad_out.contiguous();
  p.feats = feats.contiguous();
  p.points = kernel_points(feats, points);
  p.points_dtype = points.scalar_type();
  p.N = feats.size(0);
  p.F = feats.size(2);
  if (output_mask[0]) p.grad_feats = at::empty({p.N, kCorners, p.F}, feats.options());
  // In the kernels' points dtype; result() converts it to the caller's.
  if (output_mask[1]) p.grad_points = at::empty({p.N, 3}, p.points.options());
  return p;
}

} // namespace customops::trilinear
