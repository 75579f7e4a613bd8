// scaffold: what the family computes |
// quick_gelu family: y = x * sigmoid(1.702 x) and its gradient.
// scaffold-end
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cmath>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"

namespace customops {

namespace quick_gelu_math {

// scaffold: the formulas' constants |
constexpr double kAlpha = 1.702;  // rounded to each dtype where used
// scaffold-end

template <typename T>
C10_HOST_DEVICE inline T forward(T x) {
  // scaffold: the forward formula, in T (the kernels' opmath type) | return x;
  // x / (1 + exp(-a x)) rather than x * sigmoid(a x): for very negative x the
  // exponential overflows to inf and the quotient is -0, never inf * 0 = NaN.
  using std::exp;
  return x / (T(1) + exp(-T(kAlpha) * x));
  // scaffold-end
}

template <typename T>
C10_HOST_DEVICE inline T backward(T grad, T x) {
  // scaffold: the gradient, grad * f'(x) | return grad;
  // d/dx [x s(a x)] = s + a x s (1 - s), with s = sigmoid(a x). When s underflows
  // to 0 (x very negative) the second term is x * 0 = 0, not NaN.
  using std::exp;
  const T s = T(1) / (T(1) + exp(-T(kAlpha) * x));
  return grad * (s + T(kAlpha) * x * s * (T(1) - s));
  // scaffold-end
}

} // namespace quick_gelu_math

namespace checks {

inline void quick_gelu(const at::Tensor& x) {
  floating("quick_gelu", "x", x);
  dense_fits("quick_gelu", "x", x);
}

inline void quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  floating("quick_gelu_backward", "x", x);
  floating("quick_gelu_backward", "grad_out", grad_out);
  same_device("quick_gelu_backward", "grad_out", grad_out, "x", x);
  same_dtype("quick_gelu_backward", "grad_out", grad_out, "x", x);
  same_shape("quick_gelu_backward", "grad_out", grad_out, "x", x);
  dense_fits("quick_gelu_backward", "x", x);
  dense_fits("quick_gelu_backward", "grad_out", grad_out);
}

} // namespace checks

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor quick_gelu(const at::Tensor& x);
    at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x);)
} // namespace cpu

namespace cuda {
at::Tensor quick_gelu(const at::Tensor& x);
at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x);
} // namespace cuda

namespace meta {
at::Tensor quick_gelu(const at::Tensor& x);
at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x);
} // namespace meta

} // namespace customops
