#pragma once

#include <ATen/core/Tensor.h>

#include <customops/detail/find_op.h>
#include <tuple>

namespace customops {

// y = gelu(a, approximate="tanh") * b (GeGLU's gate, as in Gemma), in one pass.
// a, b: floating tensors (float16, bfloat16, float32, float64) of one shape, dtype and device,
// CPU or CUDA; half types are computed in float. Differentiable.
inline at::Tensor gelu_tanh_mul(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = detail::find_op<decltype(gelu_tanh_mul)>("customops::gelu_tanh_mul");
  return op.call(a, b);
}

// Gradients of gelu_tanh_mul: grad_out * d/da, grad_out * d/db.
// grad_out must have a's shape, dtype and device. Differentiable (double backward).
inline std::tuple<at::Tensor, at::Tensor> gelu_tanh_mul_backward(
    const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b) {
  static const auto op = detail::find_op<decltype(gelu_tanh_mul_backward)>("customops::gelu_tanh_mul_backward");
  return op.call(grad_out, a, b);
}

} // namespace customops
