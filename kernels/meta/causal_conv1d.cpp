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

// The CPU kernel's layouts (kernels/cpu/causal_conv1d.cpp): the output and x's gradient in x's layout
// (channel-last or contiguous), the others contiguous.
at::Tensor causal_conv1d_mamba(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
                               const std::optional<at::Tensor>& initial_states) {
  causal_conv1d_impl::check("causal_conv1d", x, weight, bias);
  causal_conv1d_impl::check_extras("causal_conv1d", x, weight, activation, seq_idx, initial_states);
  return causal_conv1d_impl::empty_like_layout(x);
}

causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> output_mask, std::optional<c10::string_view> activation,
    const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states) {
  const char* op = "causal_conv1d_backward";
  causal_conv1d_impl::check(op, x, weight, bias);
  causal_conv1d_impl::check_extras(op, x, weight, activation, seq_idx, initial_states);
  causal_conv1d_impl::check_grad_out(grad_out, x);
  at::Tensor gx, gw, gb, gi;
  if (output_mask[0]) gx = causal_conv1d_impl::empty_like_layout(x);
  if (output_mask[1]) gw = at::empty_symint(weight.sym_sizes(), weight.options());
  if (output_mask[2]) gb = at::empty_symint({x.sym_size(1)}, x.options());
  if (output_mask[3]) gi = at::empty_symint({x.sym_size(0), x.sym_size(1), weight.sym_size(1) - 1}, x.options());
  return {gx, gw, gb, gi};
}

// A contiguous result of x's shape; the state's update has no shape to tell.
at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                                const std::optional<at::Tensor>& cache_seqlens,
                                const std::optional<at::Tensor>& conv_state_indices) {
  causal_conv1d_impl::check_update(x, conv_state, weight, bias, activation, cache_seqlens, conv_state_indices);
  return at::empty_symint(x.sym_sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
}

} // namespace customops::meta
