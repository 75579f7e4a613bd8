#include "kernels/causal_conv1d.h"

#include <ATen/ops/empty.h>

namespace customops::meta {

// Contiguous results, as the kernels' (kernels/causal_conv1d.h: Plan).
at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  causal_conv1d_impl::check("causal_conv1d", x, weight, bias);
  return at::empty_symint(x.sym_sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
}

causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                 const at::Tensor& weight, std::array<bool, 3> output_mask) {
  causal_conv1d_impl::check("causal_conv1d_backward", x, weight, std::nullopt);
  causal_conv1d_impl::check_grad_out(grad_out, x);
  const auto contiguous = at::MemoryFormat::Contiguous;
  at::Tensor gx, gw, gb;
  if (output_mask[0]) gx = at::empty_symint(x.sym_sizes(), x.options().memory_format(contiguous));
  if (output_mask[1]) gw = at::empty_symint(weight.sym_sizes(), weight.options().memory_format(contiguous));
  if (output_mask[2]) gb = at::empty_symint({x.sym_size(1)}, x.options());
  return {gx, gw, gb};
}

} // namespace customops::meta
