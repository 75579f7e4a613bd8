// The double backward of convolution-shaped ops (conv2d, depthwise_conv2d,
// causal_conv1d). Their backward op is bilinear: (gx, gw, gb) = (Gx(g, w),
// Gw(g, x), sum(g)), with Gx and Gw the adjoints of the convolution in x and
// in w. Its derivatives for upstream gradients (ggx, ggw, ggb) are the
// convolution and the backward op again:
//   d g = conv(ggx, w) + conv(x, ggw) + ggb,  d x = Gx(g, ggw),  d w = Gw(g, ggx),
// so gradients of any order are these ops, differentiable in turn.
// python/customops/func/_common.py has the same for torch.func.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

namespace customops {

// forward(x, w, optional bias) and backward(g, x, w, mask) call the op pair
// (window arguments bound); `need` says which of (g, x, w) want a gradient;
// `spatial` counts the dimensions after the channels (a bias broadcasts over
// them). Returns (d g, d x, d w), undefined where not needed or zero.
template <typename Forward, typename Backward>
std::array<at::Tensor, 3> conv_backward_grads(const Forward& forward, const Backward& backward,
                                              std::array<bool, 3> need, const at::Tensor& g, const at::Tensor& x,
                                              const at::Tensor& w, const at::Tensor& ggx, const at::Tensor& ggw,
                                              const at::Tensor& ggb, int64_t spatial) {
  at::Tensor dg, dx, dw;
  if (need[0]) {
    if (ggx.defined()) {
      dg = forward(ggx, w, ggb.defined() ? std::optional<at::Tensor>(ggb) : std::nullopt);
    } else if (ggb.defined()) {
      std::vector<int64_t> shape(spatial + 1, 1);
      shape[0] = -1;
      dg = ggb.view(shape).expand(g.sizes()).contiguous();
    }
    if (ggw.defined()) {
      const auto term = forward(x, ggw, std::nullopt);
      dg = dg.defined() ? dg + term : term;
    }
  }
  if (need[1] && ggw.defined()) dx = std::get<0>(backward(g, x, ggw, std::array<bool, 3>{true, false, false}));
  if (need[2] && ggx.defined()) dw = std::get<1>(backward(g, ggx, w, std::array<bool, 3>{false, true, false}));
  return {dg, dx, dw};
}

} // namespace customops
