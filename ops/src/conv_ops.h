// Typed handles of the convolution family's operators, shared by the public API
// (ops/src/conv.cpp) and the autograd kernels (registration/conv2d.cpp).
#pragma once

#include <array>
#include <optional>
#include <tuple>

#include <customops/detail/find_op.h>

namespace customops::detail {

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using Conv2dSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                   at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t);
using Conv2dBackwardSignature = Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::IntArrayRef,
                                      at::IntArrayRef, at::IntArrayRef, int64_t, std::array<bool, 3>);
using DepthwiseSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                      at::IntArrayRef, at::IntArrayRef, at::IntArrayRef);
using DepthwiseBackwardSignature = Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::IntArrayRef,
                                         at::IntArrayRef, at::IntArrayRef, std::array<bool, 3>);

inline const c10::TypedOperatorHandle<Conv2dSignature>& conv2d_op() {
  static const auto op = find_op<Conv2dSignature>("customops::conv2d");
  return op;
}

inline const c10::TypedOperatorHandle<Conv2dBackwardSignature>& conv2d_backward_op() {
  static const auto op = find_op<Conv2dBackwardSignature>("customops::conv2d_backward");
  return op;
}

inline const c10::TypedOperatorHandle<DepthwiseSignature>& depthwise_conv2d_op() {
  static const auto op = find_op<DepthwiseSignature>("customops::depthwise_conv2d");
  return op;
}

inline const c10::TypedOperatorHandle<DepthwiseBackwardSignature>& depthwise_conv2d_backward_op() {
  static const auto op = find_op<DepthwiseBackwardSignature>("customops::depthwise_conv2d_backward");
  return op;
}

} // namespace customops::detail
