#pragma once

#include <ATen/core/Tensor.h>

#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>

#include <array>
#include <optional>
#include <string>
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

// causal_conv1d.mamba: x, weight, bias, activation, seq_idx, initial_states.
using CausalConv1dMambaSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                              std::optional<c10::string_view>, const std::optional<at::Tensor>&,
                                              const std::optional<at::Tensor>&);

inline const c10::TypedOperatorHandle<CausalConv1dMambaSignature>& causal_conv1d_mamba_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("customops::causal_conv1d", "mamba")
                             .typed<CausalConv1dMambaSignature>();
  return op;
}

// causal_conv1d.update: x, conv_state (updated in place), weight, bias, activation, cache_seqlens,
// conv_state_indices.
using CausalConv1dUpdateSignature = at::Tensor(const at::Tensor&, at::Tensor&, const at::Tensor&,
                                               const std::optional<at::Tensor>&, std::optional<c10::string_view>,
                                               const std::optional<at::Tensor>&, const std::optional<at::Tensor>&);

inline const c10::TypedOperatorHandle<CausalConv1dUpdateSignature>& causal_conv1d_update_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("customops::causal_conv1d", "update")
                             .typed<CausalConv1dUpdateSignature>();
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

// The arguments of Mamba's causal_conv1d_fn beyond x, weight and bias.
struct CausalConv1dOptions {
  std::optional<std::string> activation;   // std::nullopt, "silu" or "swish": fused into the pass
  std::optional<at::Tensor> seq_idx;       // (B, L) int32: packed sequences, each sees only its own steps
  std::optional<at::Tensor> initial_states;  // (B, C, K-1): the steps before t = 0; not with seq_idx
};

// The training call with those arguments (customops::causal_conv1d.mamba): the result has x's layout (a
// channel-last x, Mamba's (B, L, C) viewed as (B, C, L), is read in place); differentiable once, in
// initial_states too.
inline at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                const CausalConv1dOptions& options) {
  std::optional<c10::string_view> activation;
  if (options.activation.has_value()) activation = c10::string_view(*options.activation);
  return detail::causal_conv1d_mamba_op().call(x, weight, bias, activation, options.seq_idx, options.initial_states);
}

// The last K-1 steps of initial_states (zeros where none) followed by x: the initial_states of the next chunk
// (return_final_states of the Python call). (B, C, K-1) for x (B, C, L) and weight (C, K).
inline at::Tensor causal_conv1d_final_states(const at::Tensor& x, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& initial_states = std::nullopt) {
  const at::Tensor before = initial_states.has_value() && initial_states->defined()
                                ? *initial_states
                                : at::zeros({x.size(0), x.size(1), weight.size(1) - 1}, x.options());
  return at::cat({before, x}, -1).slice(-1, x.size(2));
}

// The arguments of Mamba's causal_conv1d_update beyond x, conv_state, weight and bias.
struct CausalConv1dUpdateOptions {
  std::optional<std::string> activation;        // std::nullopt, "silu" or "swish"
  std::optional<at::Tensor> cache_seqlens;      // (B,) int32: conv_state is a circular buffer, x written at
                                                // cache_seqlens mod S
  std::optional<at::Tensor> conv_state_indices;  // (B,) int32: row b's state is conv_state[indices[b]]; -1 pads
};

// The decoding step (customops::causal_conv1d.update): x (B, C), one new step per row, or (B, C, L), several,
// after the steps held in conv_state (B_cache, C, S) with S >= K-1, which it updates in place to hold the last S
// steps. Returns x's shape: each new step's output, as the training call gives it at that position. Inference
// only: a backward that reaches its result raises.
inline at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                       const std::optional<at::Tensor>& bias = std::nullopt,
                                       const CausalConv1dUpdateOptions& options = {}) {
  std::optional<c10::string_view> activation;
  if (options.activation.has_value()) activation = c10::string_view(*options.activation);
  return detail::causal_conv1d_update_op().call(x, conv_state, weight, bias, activation, options.cache_seqlens,
                                                options.conv_state_indices);
}

// Gradients (d x, d weight, d bias) for the upstream gradient grad_out (B, C, L);
// output_mask says which to compute (the others are undefined tensors).
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> causal_conv1d_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
    std::array<bool, 3> output_mask = {true, true, true}) {
  return detail::causal_conv1d_backward_op().call(grad_out, x, weight, output_mask);
}

} // namespace customops
