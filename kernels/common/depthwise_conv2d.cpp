#include <ATen/ATen.h>

#include "kernels/conv2d.h"

namespace customops::conv {
namespace {

// The CPU kernels stage a zero-padded copy of a plane's window reach,
// (out - 1) * stride + (kernel - 1) * dilation + 1 along each axis (each fits
// int64: it is at most the padded input). Their product must be an
// allocatable count, or the buffer's size wraps (a small buffer, then written
// past); 2^48 elements is beyond any memory.
void check_reach(const char* op, const Shape<int64_t>& s, const fold::Window& w) {
  const int64_t rows = (s.out_h - 1) * w.sh + (w.kh - 1) * w.dh + 1;
  const int64_t cols = (s.out_w - 1) * w.sw + (w.kw - 1) * w.dw + 1;
  const auto plane = checks::mul(rows, cols + 64);
  TORCH_CHECK(plane.has_value() && *plane <= (int64_t{1} << 48), "customops::", op,
              ": the window's reach over the padded input, ", rows, " x ", cols,
              " (from padding, stride and dilation), is too large for the kernels' padded planes");
}

DepthwisePlan make_plan(const char* op, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                        at::IntArrayRef dilation, bool allocate) {
  fold::Window w{};
  const auto s = check<int64_t>(op, true, input, weight, bias, stride, padding, dilation, 1, &w);
  // The stride along an axis of one output changes nothing, and a huge one
  // overflowed the CPU kernels' extents (SIGSEGV: stride 2^63 - 1, the blocked
  // forward's columns rounded up to whole blocks times the stride). Every
  // depthwise kernel takes its output sizes from the plan, so 1 is safe here.
  // (Not in check(): conv2d's CUTLASS kernels derive the output size from the
  // stride.)
  if (s.out_h == 1) w.sh = 1;
  if (s.out_w == 1) w.sw = 1;
  check_reach(op, s, w);
  const auto format = result_format(input);
  auto x = (s.batched ? input : input.unsqueeze(0)).contiguous(format);
  auto wt = weight.contiguous().view({s.O, w.kh * w.kw});
  at::Tensor b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
  DepthwisePlan p{s, w, s.O / s.C, x, wt, b, at::Tensor(), format == at::MemoryFormat::ChannelsLast};
  if (allocate) p.out = allocate_output(p);
  return p;
}

} // namespace

DepthwisePlan depthwise_plan(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                             bool allocate) {
  return make_plan("depthwise_conv2d", input, weight, bias, stride, padding, dilation, allocate);
}

at::Tensor allocate_output(const DepthwisePlan& p) {
  const auto format = p.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  return at::empty({p.s.N, p.s.O, p.s.out_h, p.s.out_w}, p.x.options().memory_format(format));
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
