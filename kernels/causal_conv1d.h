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
#include <string>
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


// The training call as Mamba's causal-conv1d takes it (causal_conv1d.mamba): a fused SiLU, packed sequences
// (seq_idx), the steps before t = 0 given (initial_states), and x of any strides.
struct Extras {
  bool silu = false;
  at::Tensor seq_idx, initial_states;  // undefined where not given
};

inline bool given(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined();
}

// Whether `activation` asks for the fused SiLU: None, "silu" or "swish" (the same), as Mamba's causal-conv1d.
inline bool fused_silu(const char* op, const std::optional<c10::string_view>& activation) {
  if (!activation.has_value()) return false;
  TORCH_CHECK(*activation == "silu" || *activation == "swish", "customops::", op,
              ": expected activation None, \"silu\" or \"swish\", got \"", std::string(*activation), "\"");
  return true;
}

inline Extras check_extras(const char* op, const at::Tensor& x, const at::Tensor& weight,
                           const std::optional<c10::string_view>& activation,
                           const std::optional<at::Tensor>& seq_idx,
                           const std::optional<at::Tensor>& initial_states) {
  Extras e;
  e.silu = fused_silu(op, activation);
  // As causal-conv1d: each sequence packed into a row starts from zeros, so there are no states to carry in.
  TORCH_CHECK(!(given(seq_idx) && given(initial_states)), "customops::", op,
              ": seq_idx and initial_states cannot be given together (each packed sequence starts from zeros)");
  if (given(seq_idx)) {
    TORCH_CHECK(seq_idx->scalar_type() == at::kInt, "customops::", op, ": expected seq_idx of dtype int32, got ",
                seq_idx->scalar_type());
    TORCH_CHECK(seq_idx->dim() == 2 && checks::holds(seq_idx->sym_size(0) == x.sym_size(0)) &&
                    checks::holds(seq_idx->sym_size(1) == x.sym_size(2)),
                "customops::", op, ": expected seq_idx of shape (B, L) = (", x.sym_size(0), ", ", x.sym_size(2),
                "), got ", seq_idx->sym_sizes());
    checks::same_device(op, "seq_idx", *seq_idx, "x", x);
    checks::dense_fits(op, "seq_idx", *seq_idx);
    e.seq_idx = *seq_idx;
  }
  if (given(initial_states)) {
    checks::floating(op, "initial_states", *initial_states);
    TORCH_CHECK(initial_states->dim() == 3 && checks::holds(initial_states->sym_size(0) == x.sym_size(0)) &&
                    checks::holds(initial_states->sym_size(1) == x.sym_size(1)) &&
                    checks::holds(initial_states->sym_size(2) == weight.sym_size(1) - 1),
                "customops::", op, ": expected initial_states of shape (B, C, K-1) = (", x.sym_size(0), ", ",
                x.sym_size(1), ", ", weight.sym_size(1) - 1, "), got ", initial_states->sym_sizes());
    checks::same_dtype(op, "initial_states", *initial_states, "x", x);
    checks::same_device(op, "initial_states", *initial_states, "x", x);
    checks::dense_fits(op, "initial_states", *initial_states);
    e.initial_states = *initial_states;
  }
  return e;
}

// Mamba's activations: (B, L, C) in memory, viewed as (B, C, L). The results keep that layout, so that the
// caller's next op (a linear layer over C) reads them as it wrote x.
inline bool channel_last(const at::Tensor& x) {
  return checks::holds(x.sym_stride(1) == 1) && !checks::holds(x.sym_stride(2) == 1);
}

// An uninitialised (B, C, L) tensor in x's layout: channel-last where x is, else contiguous.
inline at::Tensor empty_like_layout(const at::Tensor& x) {
  if (channel_last(x)) {
    return at::empty_symint({x.sym_size(0), x.sym_size(2), x.sym_size(1)}, x.options()).transpose(1, 2);
  }
  return at::empty_symint(x.sym_sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
}

using StateGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// The decoding step (causal_conv1d.update, Mamba's causal_conv1d_update): x (B, C) or (B, C, L), conv_state
// (B_cache, C, S) with S >= K-1, updated in place; cache_seqlens (B,) int32 makes the state a circular buffer;
// conv_state_indices (B,) int32 picks each row's state (B_cache = B without them), a negative one a padding row.
constexpr const char* kUpdate = "causal_conv1d.update";

struct Update {
  bool silu = false;
  at::Tensor cache_seqlens, conv_state_indices;  // undefined where not given
};

inline void check_index(const char* arg, const std::optional<at::Tensor>& t, const at::Tensor& x) {
  if (!given(t)) return;
  TORCH_CHECK(t->scalar_type() == at::kInt, "customops::", kUpdate, ": expected ", arg, " of dtype int32, got ",
              t->scalar_type());
  TORCH_CHECK(t->dim() == 1 && checks::holds(t->sym_size(0) == x.sym_size(0)), "customops::", kUpdate,
              ": expected ", arg, " of shape (B,) with B = x.size(0) = ", x.sym_size(0), ", got ", t->sym_sizes());
  checks::same_device(kUpdate, arg, *t, "x", x);
}

inline Update check_update(const at::Tensor& x, const at::Tensor& conv_state, const at::Tensor& weight,
                           const std::optional<at::Tensor>& bias, const std::optional<c10::string_view>& activation,
                           const std::optional<at::Tensor>& cache_seqlens,
                           const std::optional<at::Tensor>& conv_state_indices) {
  const char* op = kUpdate;
  checks::defined(op, "x", x);
  checks::defined(op, "conv_state", conv_state);
  checks::defined(op, "weight", weight);
  checks::floating(op, "x", x);
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3, "customops::", op, ": expected x of shape (B, C) or (B, C, L), got ",
              x.sym_sizes());
  // The weight and bias checks of the training call, on x as (B, C, L).
  check(op, x.dim() == 2 ? x.unsqueeze(-1) : x, weight, bias);
  checks::floating(op, "conv_state", conv_state);
  TORCH_CHECK(conv_state.dim() == 3 && checks::holds(conv_state.sym_size(1) == x.sym_size(1)) &&
                  checks::holds(conv_state.sym_size(2) >= weight.sym_size(1) - 1),
              "customops::", op, ": expected conv_state of shape (B_cache, C, S) with C = x.size(1) = ",
              x.sym_size(1), " and S >= K-1 = ", weight.sym_size(1) - 1, ", got ", conv_state.sym_sizes());
  TORCH_CHECK(given(conv_state_indices) || checks::holds(conv_state.sym_size(0) == x.sym_size(0)), "customops::",
              op, ": expected conv_state of batch size B = x.size(0) = ", x.sym_size(0),
              " (or conv_state_indices to pick its rows), got ", conv_state.sym_sizes());
  checks::same_dtype(op, "conv_state", conv_state, "x", x);
  checks::same_device(op, "conv_state", conv_state, "x", x);
  checks::dense_fits(op, "conv_state", conv_state);
  Update u;
  u.silu = fused_silu(op, activation);
  check_index("cache_seqlens", cache_seqlens, x);
  check_index("conv_state_indices", conv_state_indices, x);
  if (given(cache_seqlens)) {
    TORCH_CHECK(checks::holds(conv_state.sym_size(2) >= 1), "customops::", op,
                ": expected a conv_state of at least one step (S >= 1) with cache_seqlens, got ",
                conv_state.sym_sizes());
    u.cache_seqlens = *cache_seqlens;
  }
  if (given(conv_state_indices)) u.conv_state_indices = *conv_state_indices;
  return u;
}

// conv_state_indices on the host, each checked against the cache's rows (negative: a padding row).
inline void check_state_indices(const at::Tensor& indices, int64_t rows) {
  const int32_t* p = indices.const_data_ptr<int32_t>();
  for (int64_t b = 0; b < indices.numel(); ++b) {
    TORCH_CHECK(p[b] < rows, "customops::", kUpdate, ": conv_state_indices[", b, "] = ", p[b],
                " is out of range for a conv_state of ", rows, " rows");
  }
}

} // namespace causal_conv1d_impl

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
    causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                     const at::Tensor& weight, std::array<bool, 3> output_mask);
    at::Tensor causal_conv1d_mamba(const at::Tensor& x, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias,
                                   std::optional<c10::string_view> activation,
                                   const std::optional<at::Tensor>& seq_idx,
                                   const std::optional<at::Tensor>& initial_states);
    causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward(
        const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
        const std::optional<at::Tensor>& bias, std::array<bool, 4> output_mask,
        std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
        const std::optional<at::Tensor>& initial_states);
    at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    std::optional<c10::string_view> activation,
                                    const std::optional<at::Tensor>& cache_seqlens,
                                    const std::optional<at::Tensor>& conv_state_indices);)
} // namespace cpu

namespace cuda {
at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                 const at::Tensor& weight, std::array<bool, 3> output_mask);
at::Tensor causal_conv1d_mamba(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
                               const std::optional<at::Tensor>& initial_states);
causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> output_mask, std::optional<c10::string_view> activation,
    const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states);
at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                                const std::optional<at::Tensor>& cache_seqlens,
                                const std::optional<at::Tensor>& conv_state_indices);
} // namespace cuda

namespace meta {
at::Tensor causal_conv1d(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);
causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                 const at::Tensor& weight, std::array<bool, 3> output_mask);
at::Tensor causal_conv1d_mamba(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
                               const std::optional<at::Tensor>& initial_states);
causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> output_mask, std::optional<c10::string_view> activation,
    const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states);
at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                                const std::optional<at::Tensor>& cache_seqlens,
                                const std::optional<at::Tensor>& conv_state_indices);
} // namespace meta

} // namespace customops
