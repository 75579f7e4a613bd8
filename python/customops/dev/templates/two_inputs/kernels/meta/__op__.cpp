// The Meta kernels of __op__: the checks and the results' (symbolic) shapes and strides, those the CPU and CUDA
// kernels give (contiguous; kernels/__op__.h's plans).
#include "kernels/__op__.h"

#include <ATen/ops/empty.h>

namespace customops::meta {

at::Tensor __op__(const at::Tensor& a, const at::Tensor& b) {
  __op___impl::check("__op__", a, b);
  return at::empty_symint(__op___impl::out_sizes(a, b), a.options());
}

__op___impl::Grads __op___backward(const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b,
                                   std::array<bool, 2> output_mask) {
  __op___impl::check("__op___backward", a, b);
  __op___impl::check_grad_out(grad_out, a, b);
  at::Tensor grad_a, grad_b;
  if (output_mask[0]) grad_a = at::empty_symint(a.sym_sizes(), a.options());
  if (output_mask[1]) grad_b = at::empty_symint(b.sym_sizes(), b.options());
  return {grad_a, grad_b};
}

} // namespace customops::meta
