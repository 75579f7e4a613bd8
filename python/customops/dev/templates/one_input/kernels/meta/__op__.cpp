// The Meta kernels of __op__: the checks and the results' (symbolic) shapes and strides, those the CPU and CUDA
// kernels give (contiguous; kernels/__op__.h's plans).
#include "kernels/__op__.h"

#include <ATen/ops/empty.h>

namespace customops::meta {

at::Tensor __op__(const at::Tensor& x) {
  __op___impl::check("__op__", x);
  return at::empty_symint(__op___impl::out_sizes(x), x.options());
}

at::Tensor __op___backward(const at::Tensor& grad_out, const at::Tensor& x) {
  __op___impl::check("__op___backward", x);
  __op___impl::check_grad_out(grad_out, x);
  return at::empty_symint(x.sym_sizes(), x.options());
}

} // namespace customops::meta
