// Output shapes of the convolutions from symbolic sizes (torch.compile
// dynamic=True, torch.export). conv2d and depthwise_conv2d share them.
#include <ATen/ops/empty.h>

#include "kernels/conv2d.h"

namespace customops::meta {
namespace {

at::Tensor forward(const char* op, bool depthwise, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, int64_t groups) {
  fold::Window w{};
  const auto s = conv::check<c10::SymInt>(op, depthwise, input, weight, bias, stride, padding, dilation, groups, &w);
  if (s.batched) {
    return at::empty_symint({s.N, s.O, s.out_h, s.out_w}, input.options().memory_format(conv::result_format(input)));
  }
  return at::empty_symint({s.O, s.out_h, s.out_w}, input.options());
}

conv::Grads backward(const char* op, bool depthwise, const at::Tensor& grad_out, const at::Tensor& input,
                     const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask) {
  fold::Window w{};
  const auto s =
      conv::check<c10::SymInt>(op, depthwise, input, weight, std::nullopt, stride, padding, dilation, groups, &w);
  conv::check_grad_out(op, grad_out, input, s);
  const auto options = input.options();
  // conv2d's weight gradient comes in weight's memory format (as PyTorch's), depthwise_conv2d's contiguous.
  const auto grad_weight_format = depthwise ? at::MemoryFormat::Contiguous : weight.suggest_memory_format();
  return {output_mask[0] ? at::empty_symint(input.sym_sizes(), options.memory_format(conv::result_format(input)))
                         : at::Tensor(),
          output_mask[1] ? at::empty_symint(weight.sym_sizes(), options.memory_format(grad_weight_format))
                         : at::Tensor(),
          output_mask[2] ? at::empty_symint({s.O}, options) : at::Tensor()};
}

} // namespace

at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return forward("conv2d", false, input, weight, bias, stride, padding, dilation, groups);
}

conv::Grads conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                            int64_t groups, std::array<bool, 3> output_mask) {
  return backward("conv2d_backward", false, grad_out, input, weight, stride, padding, dilation, groups,
                  output_mask);
}

at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  return forward("depthwise_conv2d", true, input, weight, bias, stride, padding, dilation, 1);
}

conv::Grads depthwise_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                      std::array<bool, 3> output_mask) {
  return backward("depthwise_conv2d_backward", true, grad_out, input, weight, stride, padding, dilation, 1,
                  output_mask);
}

} // namespace customops::meta
