#include <ATen/ATen.h>

#include "kernels/conv2d.h"

namespace customops::conv {
namespace {

DepthwisePlan make_plan(const char* op, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                        at::IntArrayRef dilation, bool allocate) {
  fold::Window w{};
  const auto s = check<int64_t>(op, true, input, weight, bias, stride, padding, dilation, 1, &w);
  const auto format = result_format(input);
  auto x = (s.batched ? input : input.unsqueeze(0)).contiguous(format);
  auto wt = weight.contiguous().view({s.O, w.kh * w.kw});
  at::Tensor b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  at::Tensor out =
      allocate ? at::empty({s.N, s.O, s.out_h, s.out_w}, x.options().memory_format(format)) : at::Tensor();
  return {s, w, s.O / s.C, x, wt, b, out, format == at::MemoryFormat::ChannelsLast};
}

} // namespace

DepthwisePlan depthwise_plan(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  return make_plan("depthwise_conv2d", input, weight, bias, stride, padding, dilation, true);
}

DepthwiseBackwardPlan depthwise_backward_plan(const at::Tensor& grad_out, const at::Tensor& input,
                                              const at::Tensor& weight, at::IntArrayRef stride,
                                              at::IntArrayRef padding, at::IntArrayRef dilation) {
  const char* op = "depthwise_conv2d_backward";
  auto p = make_plan(op, input, weight, std::nullopt, stride, padding, dilation, false);
  check_grad_out(op, grad_out, input, p.s);
  const auto format = p.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  auto gout = (p.s.batched ? grad_out : grad_out.unsqueeze(0)).contiguous(format);
  return {std::move(p), std::move(gout)};
}

at::Tensor unbatch(const at::Tensor& t, const Shape<int64_t>& s) {
  return s.batched ? t : t.squeeze(0);
}

} // namespace customops::conv
