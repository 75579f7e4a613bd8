#include <customops/quick_gelu.h>

#include "ops/src/find_op.h"

namespace customops {

at::Tensor quick_gelu(const at::Tensor& x) {
  static const auto op = detail::find_op<decltype(quick_gelu)>("customops::quick_gelu");
  return op.call(x);
}

at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  static const auto op =
      detail::find_op<decltype(quick_gelu_backward)>("customops::quick_gelu_backward");
  return op.call(grad_out, x);
}

} // namespace customops
