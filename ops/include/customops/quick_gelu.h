#pragma once

#include <ATen/core/Tensor.h>

#include <customops/detail/find_op.h>

namespace customops {

// y = x * sigmoid(1.702 * x), the sigmoid approximation of GELU.
// Floating-point x (float16, bfloat16, float32, float64) on CPU or CUDA;
// half-precision inputs are computed in float. Differentiable.
inline at::Tensor quick_gelu(const at::Tensor& x) {
  static const auto op = detail::find_op<decltype(quick_gelu)>("customops::quick_gelu");
  return op.call(x);
}

// Gradient of quick_gelu with respect to x: grad_out * d/dx[x * sigmoid(1.702 x)].
// grad_out must have x's shape, dtype and device. Differentiable (double backward).
inline at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  static const auto op = detail::find_op<decltype(quick_gelu_backward)>("customops::quick_gelu_backward");
  return op.call(grad_out, x);
}

} // namespace customops
