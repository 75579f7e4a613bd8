// depthwise_conv2d on CUDA: each pass (forward, input gradient, weight and bias gradients) runs customops'
// kernels (depthwise_conv2d.cu, nhwc*.cu) or PyTorch's convolution (cuDNN or its native depthwise kernels),
// whichever kernels/cuda/common/timed_choice.h picks: the faster per shape, by the measured rule of
// kernels/common/depthwise_rule.cpp or by timing both in cuDNN's benchmark mode. Results come in the layout
// customops' kernels give (the Meta kernels' promise) whichever ran.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>

#include <algorithm>

#include "kernels/conv2d.h"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/timed_choice.h"
#include "kernels/cuda/depthwise_conv2d/direct.h"

namespace customops::cuda {
namespace {

using backend::Impl;
constexpr const char* kOp = "depthwise_conv2d";

at::MemoryFormat format_of(const conv::DepthwisePlan& p) {
  return p.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

at::Tensor in_format(const at::Tensor& t, at::MemoryFormat format) {
  return !t.defined() || t.is_contiguous(format) ? t : t.contiguous(format);
}

// The window for PyTorch's kernels, which compute garbage for a huge stride or dilation that changes nothing
// (a dilation of 2^62 over a one-row filter): the plan's dilation (1 along an axis of one tap), and along an
// axis of one output a stride of the padded input's extent, which keeps that one output (the plan's stride
// is 1 there, which would give more).
struct Window {
  int64_t stride[2], padding[2], dilation[2];
  explicit Window(const conv::DepthwisePlan& p)
      : stride{p.s.out_h == 1 ? std::max<int64_t>(1, p.s.H + 2 * p.w.ph) : p.w.sh,
               p.s.out_w == 1 ? std::max<int64_t>(1, p.s.W + 2 * p.w.pw) : p.w.sw},
        padding{p.w.ph, p.w.pw},
        dilation{p.w.dh, p.w.dw} {}
};

Impl choose_pass(conv::DepthwisePass pass, const conv::DepthwisePlan& p, bool bias,
                 const std::function<void()>& ours, const std::function<void()>& theirs) {
  const auto c = conv::depthwise_case(pass, p, bias);
  const auto key = [&] { return conv::depthwise_key(c, p.x.get_device()); };
  return choose(kOp, conv::depthwise_has_choice(c), conv::depthwise_rule(c), key, ours, theirs);
}

at::Tensor pytorch_forward(const conv::DepthwisePlan& p, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias, const Window& w) {
  const int64_t zero[2] = {0, 0};
  return at::convolution(p.x, weight, bias, w.stride, w.padding, w.dilation, false, zero, p.s.C);
}

conv::Grads pytorch_backward(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& weight, const Window& w,
                             std::array<bool, 3> mask) {
  const int64_t zero[2] = {0, 0};
  const int64_t bias_size[1] = {bp.p.s.O};
  return at::convolution_backward(bp.gout, bp.p.x, weight, mask[2] ? at::OptionalIntArrayRef(bias_size) : std::nullopt,
                                  w.stride, w.padding, w.dilation, false, zero, bp.p.s.C, mask);
}

}  // namespace

at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  conv::check_devices(kOp, input, weight, bias);
  const KernelGuard guard(input.device());
  auto p = conv::depthwise_plan(input, weight, bias, stride, padding, dilation, /*allocate=*/false);
  depthwise::check_int_window(kOp, p, stride, padding, dilation);
  const Window w(p);
  const Impl impl = choose_pass(
      conv::DepthwisePass::forward, p, p.bias.defined(), [&] { depthwise::forward(p); },
      [&] { pytorch_forward(p, weight, bias, w); });
  if (impl == Impl::customops) return depthwise::forward(p);
  return conv::unbatch(in_format(pytorch_forward(p, weight, bias, w), format_of(p)), p.s);
}

conv::Grads depthwise_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                      std::array<bool, 3> output_mask) {
  const char* op = "depthwise_conv2d_backward";
  conv::check_devices(op, input, weight, std::nullopt, grad_out);
  const KernelGuard guard(input.device());
  const auto bp = conv::depthwise_backward_plan(grad_out, input, weight, stride, padding, dilation);
  depthwise::check_int_window(op, bp.p, stride, padding, dilation);
  const Window w(bp.p);
  const bool bias = output_mask[2];
  // The bias gradient goes with the weight gradient: both reduce over the batch and the plane.
  const std::array<bool, 3> input_pass{true, false, false}, weight_pass{false, true, bias};
  const Impl gi = !output_mask[0] ? Impl::customops
                                  : choose_pass(
                                        conv::DepthwisePass::input_grad, bp.p, false,
                                        [&] { depthwise::backward(bp, weight, input_pass); },
                                        [&] { pytorch_backward(bp, weight, w, input_pass); });
  const Impl gw = !(output_mask[1] || bias) ? Impl::customops
                                            : choose_pass(
                                                  conv::DepthwisePass::weight_grad, bp.p, bias,
                                                  [&] { depthwise::backward(bp, weight, weight_pass); },
                                                  [&] { pytorch_backward(bp, weight, w, weight_pass); });
  std::array<bool, 3> ours{}, theirs{};
  for (int i = 0; i < 3; ++i) {
    const bool mine = (i == 0 ? gi : gw) == Impl::customops;
    ours[i] = output_mask[i] && mine;
    theirs[i] = output_mask[i] && !mine;
  }
  conv::Grads out;
  if (ours[0] || ours[1] || ours[2]) out = depthwise::backward(bp, weight, ours);
  if (theirs[0] || theirs[1] || theirs[2]) {
    auto [g_input, g_weight, g_bias] = pytorch_backward(bp, weight, w, theirs);
    if (theirs[0]) std::get<0>(out) = conv::unbatch(in_format(g_input, format_of(bp.p)), bp.p.s);
    if (theirs[1]) std::get<1>(out) = in_format(g_weight, at::MemoryFormat::Contiguous);
    if (theirs[2]) std::get<2>(out) = g_bias;
  }
  return out;
}

}  // namespace customops::cuda
