// causal_conv1d: the short depthwise causal convolution of sequence models
// (Mamba's, H3's, GLA's): for x (B, C, L), weight (C, K) and an optional bias (C),
//   y[b, c, t] = bias[c] + sum_{k < K} weight[c, k] * x[b, c, t - (K-1) + k],
// with x read as 0 before t = 0: each step sees itself and the K-1 steps
// before it, never a later one. The input gradient is the same filter run
// backwards in time (taps reversed, reading g after t); the weight gradient
// sums g against x shifted by each tap over batch and time.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <array>
#include <optional>
#include <tuple>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"
#include "kernels/core/causal_conv1d.h"

namespace customops {

namespace causal_conv1d_impl {

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// Dtypes: x, weight, bias and grad_out share one floating dtype, computed in
// at::opmath_type of it (float for half types), as F.conv1d does.

// Checks shared by every backend: x (B, C, L), weight (C, K) with 1 <= K <=
// kMaxWidth, bias (C) when given; one dtype, one device.
inline void check(const char* op, const at::Tensor& x, const at::Tensor& weight,
                  const std::optional<at::Tensor>& bias) {
  checks::defined(op, "x", x);
  checks::defined(op, "weight", weight);
  checks::floating(op, "x", x);
  checks::floating(op, "weight", weight);
  TORCH_CHECK(x.dim() == 3, "customops::", op, ": expected x of shape (B, C, L), got ", x.sym_sizes());
  TORCH_CHECK(weight.dim() == 2 && checks::holds(weight.sym_size(0) == x.sym_size(1)), "customops::", op,
              ": expected weight of shape (C, K) with C = x.size(1) = ", x.sym_size(1), ", got ", weight.sym_sizes());
  TORCH_CHECK(checks::holds(weight.sym_size(1) >= 1) && checks::holds(weight.sym_size(1) <= kMaxWidth),
              "customops::", op, ": expected a filter width K = weight.size(1) between 1 and ", kMaxWidth, ", got ",
              weight.sym_size(1));
  checks::same_dtype(op, "weight", weight, "x", x);
  checks::same_device(op, "weight", weight, "x", x);
  checks::dense_fits(op, "x", x);
  checks::dense_fits(op, "weight", weight);
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->dim() == 1 && checks::holds(bias->sym_size(0) == x.sym_size(1)), "customops::", op,
                ": expected bias of shape (C,) with C = x.size(1) = ", x.sym_size(1), ", got ", bias->sym_sizes());
    checks::same_dtype(op, "bias", *bias, "x", x);
    checks::same_device(op, "bias", *bias, "x", x);
  }
}

inline void check_grad_out(const at::Tensor& grad_out, const at::Tensor& x) {
  const char* op = "causal_conv1d_backward";
  checks::defined(op, "grad_out", grad_out);
  checks::floating(op, "grad_out", grad_out);
  TORCH_CHECK(grad_out.dim() == 3 && checks::holds(grad_out.sym_size(0) == x.sym_size(0)) &&
                  checks::holds(grad_out.sym_size(1) == x.sym_size(1)) &&
                  checks::holds(grad_out.sym_size(2) == x.sym_size(2)),
              "customops::", op, ": expected grad_out of x's shape ", x.sym_sizes(), ", got ", grad_out.sym_sizes());
  checks::same_dtype(op, "grad_out", grad_out, "x", x);
  checks::same_device(op, "grad_out", grad_out, "x", x);
  checks::dense_fits(op, "grad_out", grad_out);
}

// What a CPU or CUDA kernel needs once the arguments are checked: contiguous
// (B, C, L) rows and (C, K) taps, and the results allocated (only those
// output_mask asks for). Results are contiguous, whatever x's strides (a
// (B, L, C) tensor transposed to (B, C, L), as Mamba's, is copied once).
struct Plan {
  at::Tensor grad, x, weight, bias;  // grad only for the backward, bias where given
  at::Tensor out, grad_x, grad_weight, grad_bias;
  int64_t B, C, L, K;

  Grads result() const { return {grad_x, grad_weight, grad_bias}; }
};

inline Plan make_plan(const at::Tensor& x, const at::Tensor& weight) {
  Plan p;
  p.x = x.contiguous();
  p.weight = weight.contiguous();
  p.B = x.size(0);
  p.C = x.size(1);
  p.L = x.size(2);
  p.K = weight.size(1);
  return p;
}

inline Plan plan_forward(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check("causal_conv1d", x, weight, bias);
  Plan p = make_plan(x, weight);
  if (bias.has_value() && bias->defined()) p.bias = bias->contiguous();
  p.out = at::empty({p.B, p.C, p.L}, x.options());
  return p;
}

inline Plan plan_backward(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
                          std::array<bool, 3> output_mask) {
  check("causal_conv1d_backward", x, weight, std::nullopt);
  check_grad_out(grad_out, x);
  Plan p = make_plan(x, weight);
  p.grad = grad_out.contiguous();
  if (output_mask[0]) p.grad_x = at::empty({p.B, p.C, p.L}, x.options());
  if (output_mask[1]) p.grad_weight = at::empty({p.C, p.K}, weight.options());
  if (output_mask[2]) p.grad_bias = at::empty({p.C}, x.options());
  return p;
}

} // namespace causal_conv1d_impl

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
    causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                     const at::Tensor& weight, std::array<bool, 3> output_mask);)
} // namespace cpu

namespace cuda {
at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                 const at::Tensor& weight, std::array<bool, 3> output_mask);
} // namespace cuda

namespace meta {
at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                 const at::Tensor& weight, std::array<bool, 3> output_mask);
} // namespace meta

} // namespace customops
