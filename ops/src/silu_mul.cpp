#include <customops/silu_mul.h>

#include "ops/src/find_op.h"

namespace customops {

at::Tensor silu_mul(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = detail::find_op<decltype(silu_mul)>("customops::silu_mul");
  return op.call(a, b);
}

std::tuple<at::Tensor, at::Tensor> silu_mul_backward(const at::Tensor& grad_out, const at::Tensor& a,
                                                     const at::Tensor& b) {
  static const auto op = detail::find_op<decltype(silu_mul_backward)>("customops::silu_mul_backward");
  return op.call(grad_out, a, b);
}

} // namespace customops
