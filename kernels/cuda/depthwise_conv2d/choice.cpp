// depthwise_conv2d on CUDA: each pass (forward, input gradient, weight and bias gradients) runs customops'
// kernels (depthwise_conv2d.cu, nhwc*.cu) or PyTorch's convolution (cuDNN or its native depthwise kernels),
// whichever kernels/cuda/common/timed_choice.h picks: the faster per shape, by the measured rule of
// kernels/common/depthwise_rule.cpp or by timing both in cuDNN's benchmark mode. The call itself goes through
// kernels/common/depthwise_route.h (one plan per call, PyTorch's result in the layout customops' kernels give,
// the Meta kernels' promise, with no copy where it already is).
#include "kernels/common/depthwise_route.h"
#include "kernels/conv2d.h"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/timed_choice.h"
#include "kernels/cuda/depthwise_conv2d/direct.h"

namespace customops::cuda {
namespace {

backend::Impl choose_pass(conv::DepthwisePass pass, const conv::DepthwisePlan& p, bool bias,
                          const std::function<void()>& ours, const std::function<void()>& theirs) {
  const auto c = conv::depthwise_case(pass, p, bias);
  const auto key = [&] { return conv::depthwise_key(c, p.x.get_device()); };
  return choose("depthwise_conv2d", conv::depthwise_has_choice(c), conv::depthwise_rule(c), key, ours, theirs);
}

// Built once: its functions are the same for every call.
const conv::DepthwiseRoute& route() {
  static const conv::DepthwiseRoute r{depthwise::forward, depthwise::backward, depthwise::check_int_window,
                                      choose_pass};
  return r;
}

}  // namespace

at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  conv::check_devices("depthwise_conv2d", input, weight, bias);
  const KernelGuard guard(input.device());
  return conv::routed_depthwise_forward(route(), input, weight, bias, stride, padding, dilation);
}

conv::Grads depthwise_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                      std::array<bool, 3> output_mask) {
  conv::check_devices("depthwise_conv2d_backward", input, weight, std::nullopt, grad_out);
  const KernelGuard guard(input.device());
  return conv::routed_depthwise_backward(route(), grad_out, input, weight, stride, padding, dilation, output_mask);
}

}  // namespace customops::cuda
