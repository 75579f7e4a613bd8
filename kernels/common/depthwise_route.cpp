#include "kernels/common/depthwise_route.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>

#include <algorithm>
#include <atomic>

namespace customops::conv {
namespace {

using backend::Impl;

// Relaxed counters: a few nanoseconds per call, against the microseconds a pass costs the host.
struct Counters {
  std::atomic<int64_t> plans{0}, choices{0}, pytorch_calls{0}, layout_copies{0};
};

Counters& counters() {
  static Counters c;
  return c;
}

void bump(std::atomic<int64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

at::MemoryFormat format_of(const DepthwisePlan& p) {
  return p.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

// PyTorch's result in the layout customops promises: itself where it already is (cuDNN's NHWC kernels return
// channels_last for a channels_last input), else a copy.
at::Tensor in_format(const at::Tensor& t, at::MemoryFormat format) {
  if (!t.defined() || t.is_contiguous(format)) return t;
  bump(counters().layout_copies);
  return t.contiguous(format);
}

// The window for PyTorch's kernels, which compute garbage for a huge stride or dilation that changes nothing
// (a dilation of 2^62 over a one-row filter): the plan's dilation (1 along an axis of one tap), and along an
// axis of one output a stride of the padded input's extent, which keeps that one output (the plan's stride
// is 1 there, which would give more).
struct Window {
  int64_t stride[2], padding[2], dilation[2];
  explicit Window(const DepthwisePlan& p)
      : stride{p.s.out_h == 1 ? std::max<int64_t>(1, p.s.H + 2 * p.w.ph) : p.w.sh,
               p.s.out_w == 1 ? std::max<int64_t>(1, p.s.W + 2 * p.w.pw) : p.w.sw},
        padding{p.w.ph, p.w.pw},
        dilation{p.w.dh, p.w.dw} {}
};

// PyTorch gets the caller's weight as given, the way nn.Conv2d hands over its parameter (the plan's weight is a
// (C*m, kh*kw) view for customops' kernels).
at::Tensor pytorch_forward(const DepthwisePlan& p, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           const Window& w) {
  const int64_t zero[2] = {0, 0};
  bump(counters().pytorch_calls);
  return at::convolution(p.x, weight, bias, w.stride, w.padding, w.dilation, false, zero, p.s.C);
}

Grads pytorch_backward(const DepthwiseBackwardPlan& bp, const at::Tensor& weight, const Window& w,
                       std::array<bool, 3> mask) {
  const int64_t zero[2] = {0, 0};
  const int64_t bias_size[1] = {bp.p.s.O};
  bump(counters().pytorch_calls);
  return at::convolution_backward(bp.gout, bp.p.x, weight,
                                  mask[2] ? at::OptionalIntArrayRef(bias_size) : std::nullopt, w.stride, w.padding,
                                  w.dilation, false, zero, bp.p.s.C, mask);
}

Impl choose(const DepthwiseRoute& route, DepthwisePass pass, const DepthwisePlan& p, bool bias,
            const std::function<void()>& ours, const std::function<void()>& theirs) {
  bump(counters().choices);
  return route.choose(pass, p, bias, ours, theirs);
}

}  // namespace

at::Tensor routed_depthwise_forward(const DepthwiseRoute& route, const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation) {
  auto p = depthwise_plan(input, weight, bias, stride, padding, dilation, /*allocate=*/false);
  bump(counters().plans);
  if (route.check) route.check("depthwise_conv2d", p, stride, padding, dilation);
  const Window w(p);
  const Impl impl = choose(
      route, DepthwisePass::forward, p, p.bias.defined(), [&] { route.forward(p); },
      [&] { pytorch_forward(p, weight, bias, w); });
  if (impl == Impl::customops) return route.forward(p);
  return unbatch(in_format(pytorch_forward(p, weight, bias, w), format_of(p)), p.s);
}

Grads routed_depthwise_backward(const DepthwiseRoute& route, const at::Tensor& grad_out, const at::Tensor& input,
                                const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, std::array<bool, 3> output_mask) {
  const auto bp = depthwise_backward_plan(grad_out, input, weight, stride, padding, dilation);
  bump(counters().plans);
  if (route.check) route.check("depthwise_conv2d_backward", bp.p, stride, padding, dilation);
  const Window w(bp.p);
  const bool bias = output_mask[2];
  // The bias gradient goes with the weight gradient: both reduce over the batch and the plane.
  const std::array<bool, 3> input_pass{true, false, false}, weight_pass{false, true, bias};
  const Impl gi = !output_mask[0] ? Impl::customops
                                  : choose(
                                        route, DepthwisePass::input_grad, bp.p, false,
                                        [&] { route.backward(bp, weight, input_pass); },
                                        [&] { pytorch_backward(bp, weight, w, input_pass); });
  const Impl gw = !(output_mask[1] || bias) ? Impl::customops
                                            : choose(
                                                  route, DepthwisePass::weight_grad, bp.p, bias,
                                                  [&] { route.backward(bp, weight, weight_pass); },
                                                  [&] { pytorch_backward(bp, weight, w, weight_pass); });
  std::array<bool, 3> ours{}, theirs{};
  for (int i = 0; i < 3; ++i) {
    const bool mine = (i == 0 ? gi : gw) == Impl::customops;
    ours[i] = output_mask[i] && mine;
    theirs[i] = output_mask[i] && !mine;
  }
  // Both implementations' passes are one call each: PyTorch computes the input and weight gradients it takes
  // in one convolution_backward, as nn.Conv2d's backward does.
  Grads out;
  if (ours[0] || ours[1] || ours[2]) out = route.backward(bp, weight, ours);
  if (theirs[0] || theirs[1] || theirs[2]) {
    auto [g_input, g_weight, g_bias] = pytorch_backward(bp, weight, w, theirs);
    if (theirs[0]) std::get<0>(out) = unbatch(in_format(g_input, format_of(bp.p)), bp.p.s);
    if (theirs[1]) std::get<1>(out) = in_format(g_weight, at::MemoryFormat::Contiguous);
    if (theirs[2]) std::get<2>(out) = g_bias;
  }
  return out;
}

DepthwiseRouteStats depthwise_route_stats(bool reset) {
  auto& c = counters();
  const auto read = [reset](std::atomic<int64_t>& counter) {
    return reset ? counter.exchange(0, std::memory_order_relaxed) : counter.load(std::memory_order_relaxed);
  };
  return {read(c.plans), read(c.choices), read(c.pytorch_calls), read(c.layout_copies)};
}

}  // namespace customops::conv
