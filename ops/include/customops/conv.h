#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/conv2d.cpp) call the ops through them.
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

namespace customops {

// 2-D convolution, equal to torch::nn::functional::conv2d with numeric padding:
// input (N, C, H, W) or (C, H, W), weight (O, C/groups, kh, kw), bias (O) or
// none. Computed as im2col + batched GEMM (BLAS / cuBLAS); the column buffer is
// built a chunk of the batch at a time, at most CUSTOMOPS_CONV2D_WORKSPACE_MIB
// (default 256) MiB unless one image's columns alone are larger. A 1x1,
// stride-1, unpadded convolution skips im2col.
inline at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias = {},
                         at::IntArrayRef stride = {1, 1}, at::IntArrayRef padding = {0, 0},
                         at::IntArrayRef dilation = {1, 1}, int64_t groups = 1) {
  return detail::conv2d_op().call(input, weight, bias, stride, padding, dilation, groups);
}

// Gradients of conv2d with respect to (input, weight, bias); an entry is
// computed only where output_mask asks for it, and is undefined otherwise.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask) {
  return detail::conv2d_backward_op().call(grad_out, input, weight, stride, padding, dilation, groups, output_mask);
}

// Depthwise convolution: weight (C*m, 1, kh, kw) for a channel multiplier
// m >= 1; output channel o reads input channel o / m. Equal to conv2d with
// groups = C, computed by direct kernels (no column buffer).
inline at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias = {}, at::IntArrayRef stride = {1, 1},
                                   at::IntArrayRef padding = {0, 0}, at::IntArrayRef dilation = {1, 1}) {
  return detail::depthwise_conv2d_op().call(input, weight, bias, stride, padding, dilation);
}

inline std::tuple<at::Tensor, at::Tensor, at::Tensor> depthwise_conv2d_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, std::array<bool, 3> output_mask) {
  return detail::depthwise_conv2d_backward_op().call(grad_out, input, weight, stride, padding, dilation,
                                                     output_mask);
}

} // namespace customops
