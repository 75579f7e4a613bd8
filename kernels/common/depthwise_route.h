// A depthwise_conv2d call whose passes (forward, input gradient, weight and bias gradients) each run the device's
// own kernels or PyTorch's convolution (cuDNN, or its native depthwise kernels), as the device's choice decides:
// the CUDA op runs every call through it (kernels/cuda/depthwise_conv2d/choice.cpp), and the customops_backends
// test ops run CPU calls through it with the choices given, so that the CPU tests check the mechanism.
//
// A pass handed to PyTorch costs the host what nn.Conv2d's own call costs: the call's plan (argument checks,
// dense views) is made once and serves both implementations, PyTorch gets the caller's tensors as given (a
// depthwise weight, (C*m, 1, kh, kw), is dense in both memory formats whatever the stride of its dimension of
// one, so nothing is gained by a copy), and its result is copied into the layout customops promises (the Meta
// kernels' strides) only where it is not in it already.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

#include "kernels/conv2d.h"

namespace customops::conv {

struct DepthwiseRoute {
  // The device's kernels on the call's plan (the forward's made without its output); results unbatched as the op's.
  std::function<at::Tensor(DepthwisePlan&)> forward;
  std::function<Grads(const DepthwiseBackwardPlan&, const at::Tensor& weight, std::array<bool, 3> mask)> backward;
  // Checks of the device's kernels beyond the plan's (CUDA: the window fits their int coordinates); may be empty.
  std::function<void(const char* op, const DepthwisePlan&, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation)>
      check;
  // Which implementation runs `pass` (`bias`: the pass computes the bias or its gradient too); `ours` and `theirs`
  // run the pass once each, for a choice that times both.
  std::function<backend::Impl(DepthwisePass pass, const DepthwisePlan&, bool bias, const std::function<void()>& ours,
                              const std::function<void()>& theirs)>
      choose;
};

at::Tensor routed_depthwise_forward(const DepthwiseRoute& route, const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation);
Grads routed_depthwise_backward(const DepthwiseRoute& route, const at::Tensor& grad_out, const at::Tensor& input,
                                const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, std::array<bool, 3> output_mask);

// What routed calls did since the last reset, process-wide (the tests read it through
// customops_backends.depthwise_conv2d_route_stats): plans made, passes decided, calls of PyTorch's convolution,
// and results copied into the promised layout.
struct DepthwiseRouteStats {
  int64_t plans, choices, pytorch_calls, layout_copies;
};
DepthwiseRouteStats depthwise_route_stats(bool reset);

}  // namespace customops::conv
