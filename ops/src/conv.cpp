#include <customops/conv.h>

#include "ops/src/conv_ops.h"

namespace customops {

at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return detail::conv2d_op().call(input, weight, bias, stride, padding, dilation, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                               const at::Tensor& weight, at::IntArrayRef stride,
                                                               at::IntArrayRef padding, at::IntArrayRef dilation,
                                                               int64_t groups, std::array<bool, 3> output_mask) {
  return detail::conv2d_backward_op().call(grad_out, input, weight, stride, padding, dilation, groups, output_mask);
}

at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  return detail::depthwise_conv2d_op().call(input, weight, bias, stride, padding, dilation);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> depthwise_conv2d_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, std::array<bool, 3> output_mask) {
  return detail::depthwise_conv2d_backward_op().call(grad_out, input, weight, stride, padding, dilation,
                                                     output_mask);
}

} // namespace customops
