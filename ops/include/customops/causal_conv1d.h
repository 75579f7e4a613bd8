#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/causal_conv1d.cpp) call the ops through them.
namespace customops::detail {

using CausalConv1dSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&);
using CausalConv1dGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using CausalConv1dBackwardSignature = CausalConv1dGrads(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                        std::array<bool, 3>);

inline const c10::TypedOperatorHandle<CausalConv1dSignature>& causal_conv1d_op() {
  static const auto op = find_op<CausalConv1dSignature>("customops::causal_conv1d");
  return op;
}

inline const c10::TypedOperatorHandle<CausalConv1dBackwardSignature>& causal_conv1d_backward_op() {
  static const auto op = find_op<CausalConv1dBackwardSignature>("customops::causal_conv1d_backward");
  return op;
}

} // namespace customops::detail

namespace customops {

// The short causal depthwise convolution of sequence models (Mamba's): x (B, C,
// L), weight (C, K) with 1 <= K <= 8, an optional bias (C); returns (B, C, L),
// y[b, c, t] = bias[c] + sum_k weight[c, k] * x[b, c, t - (K-1) + k], x read as
// 0 before t = 0, so no step sees a later one. The same as F.conv1d(x,
// weight.unsqueeze(1), bias, padding=K-1, groups=C)[..., :L]. One floating
// dtype for all, computed in at::opmath_type of it; the result is contiguous.
// Differentiable (twice) in x, weight and bias.
inline at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias = std::nullopt) {
  return detail::causal_conv1d_op().call(x, weight, bias);
}

// Gradients (d x, d weight, d bias) for the upstream gradient grad_out (B, C, L);
// output_mask says which to compute (the others are undefined tensors).
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_conv1d_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> output_mask = {true, true, true}) {
  return detail::causal_conv1d_backward_op().call(grad_out, x, weight, output_mask);
}

} // namespace customops
