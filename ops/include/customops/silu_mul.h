#pragma once

#include <ATen/core/Tensor.h>

#include <customops/detail/find_op.h>
#include <tuple>

namespace customops {

// y = silu(a) * b = a * sigmoid(a) * b (SwiGLU's gated activation), in one pass.
// a and b: floating tensors (float16, bfloat16, float32, float64) of one shape,
// dtype and device, CPU or CUDA; half types are computed in float. Differentiable.
inline at::Tensor silu_mul(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = detail::find_op<decltype(silu_mul)>("customops::silu_mul");
  return op.call(a, b);
}

// Gradients of silu_mul with respect to a and b: grad_out * d/da and grad_out * d/db.
// grad_out must have a's shape, dtype and device. Differentiable (double backward).
inline std::tuple<at::Tensor, at::Tensor> silu_mul_backward(const at::Tensor& grad_out, const at::Tensor& a,
                                                            const at::Tensor& b) {
  static const auto op = detail::find_op<decltype(silu_mul_backward)>("customops::silu_mul_backward");
  return op.call(grad_out, a, b);
}

} // namespace customops
