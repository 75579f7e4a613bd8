// Kernels of causal_conv1d for every dispatch key, and its autograd.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <customops/causal_conv1d.h>

#include "kernels/causal_conv1d.h"
#include "registration/autocast.h"
#include "registration/conv_grads.h"
#include "registration/out_variant.h"

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Mask = std::array<bool, 3>;
using MambaSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                  std::optional<c10::string_view>, const std::optional<at::Tensor>&,
                                  const std::optional<at::Tensor>&);
using MambaBackwardSignature = causal_conv1d_impl::StateGrads(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                              const std::optional<at::Tensor>&, std::array<bool, 4>,
                                                              std::optional<c10::string_view>,
                                                              const std::optional<at::Tensor>&,
                                                              const std::optional<at::Tensor>&);

class CausalConv1dFunction : public torch::autograd::Function<CausalConv1dFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::causal_conv1d_op().call(x, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Mask mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                    ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)};
    auto [gx, gw, gb] = detail::causal_conv1d_backward_op().call(grads[0], saved[0], saved[1], mask);
    return {gx, gw, gb};
  }
};

// The backward op is bilinear; its derivatives are the op and the backward op
// again (registration/conv_grads.h).
class CausalConv1dBackwardFunction : public torch::autograd::Function<CausalConv1dBackwardFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& x,
                               const at::Tensor& weight, Mask mask) {
    ctx->save_for_backward({g, x, weight});
    ctx->saved_data["mask"] = c10::List<bool>({mask[0], mask[1], mask[2]});
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [gx, gw, gb] = detail::causal_conv1d_backward_op().call(g, x, weight, mask);
    variable_list out;
    for (auto* t : {&gx, &gw, &gb}) {
      if (t->defined()) out.push_back(*t);
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &g = saved[0], &x = saved[1], &w = saved[2];
    const auto mask = ctx->saved_data["mask"].toBoolList();
    at::Tensor gg[3];
    for (size_t k = 0, next = 0; k < 3; ++k) {
      if (mask[k]) gg[k] = grads[next++];
    }
    const auto filter = [](const at::Tensor& x_, const at::Tensor& w_, const std::optional<at::Tensor>& b_) {
      return causal_conv1d(x_, w_, b_);
    };
    const auto adjoints = [](const at::Tensor& g_, const at::Tensor& x_, const at::Tensor& w_, Mask m) {
      return causal_conv1d_backward(g_, x_, w_, m);
    };
    const auto [dg, dx, dw] = conv_backward_grads(
        filter, adjoints, {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)}, g, x, w,
        gg[0], gg[1], gg[2], 1);
    return {dg, dx, dw, {}};
  }

  static detail::CausalConv1dGrads apply(const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight,
                                         Mask mask) {
    const auto out = torch::autograd::Function<CausalConv1dBackwardFunction>::apply(g, x, weight, mask);
    at::Tensor r[3];
    for (size_t k = 0, next = 0; k < 3; ++k) {
      if (mask[k]) r[k] = out[next++];
    }
    return {r[0], r[1], r[2]};
  }
};

at::Tensor causal_conv1d_autograd(const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias) {
  // None fails here with its name, not in autograd's bookkeeping.
  checks::defined("causal_conv1d", "x", x);
  checks::defined("causal_conv1d", "weight", weight);
  const bool bias_grad = bias.has_value() && bias->defined() && bias->requires_grad();
  if (!at::GradMode::is_enabled() || !(x.requires_grad() || weight.requires_grad() || bias_grad)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::causal_conv1d_op().call(x, weight, bias);
  }
  return CausalConv1dFunction::apply(x, weight, bias);
}

detail::CausalConv1dGrads causal_conv1d_backward_autograd(const at::Tensor& g, const at::Tensor& x,
                                                          const at::Tensor& weight, Mask mask) {
  checks::defined("causal_conv1d_backward", "grad_out", g);
  checks::defined("causal_conv1d_backward", "x", x);
  checks::defined("causal_conv1d_backward", "weight", weight);
  return CausalConv1dBackwardFunction::apply(g, x, weight, mask);
}

// The training call with Mamba's arguments (causal_conv1d.mamba). Differentiable once, as causal-conv1d's: its
// backward is not bilinear once a SiLU is fused, and a second derivative raises (CausalConv1dMambaOnce).
std::optional<c10::string_view> view_of(const std::optional<std::string>& s) {
  return s.has_value() ? std::optional<c10::string_view>(*s) : std::nullopt;
}

class CausalConv1dMambaOnce : public torch::autograd::Function<CausalConv1dMambaOnce> {
 public:
  static variable_list forward(AutogradContext*, const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& seq_idx,
                               const std::optional<at::Tensor>& initial_states, std::array<bool, 4> mask,
                               std::optional<std::string> activation) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [gx, gw, gb, gi] = c10::Dispatcher::singleton()
                                .findSchemaOrThrow("customops::causal_conv1d_backward", "mamba")
                                .typed<MambaBackwardSignature>()
                                .call(g, x, weight, bias, mask, view_of(activation), seq_idx, initial_states);
    variable_list out;
    for (auto* t : {&gx, &gw, &gb, &gi}) {
      if (t->defined()) out.push_back(*t);
    }
    return out;
  }

  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false, "customops::causal_conv1d: with activation, seq_idx or initial_states it is differentiable "
                "once (its backward has no derivative); without them, twice");
  }

  // The four gradients, undefined where the mask does not ask for them.
  static causal_conv1d_impl::StateGrads call(const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias,
                                             const std::optional<at::Tensor>& seq_idx,
                                             const std::optional<at::Tensor>& initial_states,
                                             std::array<bool, 4> mask, std::optional<std::string> activation) {
    const auto out = apply(g, x, weight, bias, seq_idx, initial_states, mask, activation);
    at::Tensor r[4];
    for (size_t k = 0, next = 0; k < 4; ++k) {
      if (mask[k]) r[k] = out[next++];
    }
    return {r[0], r[1], r[2], r[3]};
  }
};

class CausalConv1dMambaFunction : public torch::autograd::Function<CausalConv1dMambaFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& seq_idx,
                            const std::optional<at::Tensor>& initial_states, std::optional<std::string> activation) {
    ctx->save_for_backward({x, weight, bias.value_or(at::Tensor()), seq_idx.value_or(at::Tensor()),
                            initial_states.value_or(at::Tensor())});
    ctx->saved_data["activation"] = activation.has_value() ? c10::IValue(*activation) : c10::IValue();
    ctx->saved_data["bias_grad"] = causal_conv1d_impl::given(bias) && bias->requires_grad();
    ctx->saved_data["initial_states_grad"] =
        causal_conv1d_impl::given(initial_states) && initial_states->requires_grad();
    at::AutoDispatchBelowADInplaceOrView guard;
    return mamba_op().call(x, weight, bias, view_of(activation), seq_idx, initial_states);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto opt = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
    const auto act = ctx->saved_data["activation"];
    std::optional<std::string> activation;
    if (!act.isNone()) activation = act.toStringRef();
    const std::array<bool, 4> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                   ctx->saved_data["bias_grad"].toBool(),
                                   ctx->saved_data["initial_states_grad"].toBool()};
    const auto [gx, gw, gb, gi] = CausalConv1dMambaOnce::call(grads[0], saved[0], saved[1], opt(saved[2]),
                                                              opt(saved[3]), opt(saved[4]), mask, activation);
    return {gx, gw, gb, {}, gi, {}};
  }

  static const c10::TypedOperatorHandle<MambaSignature>& mamba_op() {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow("customops::causal_conv1d", "mamba").typed<MambaSignature>();
    return op;
  }
};

at::Tensor causal_conv1d_mamba_autograd(const at::Tensor& x, const at::Tensor& weight,
                                        const std::optional<at::Tensor>& bias,
                                        std::optional<c10::string_view> activation,
                                        const std::optional<at::Tensor>& seq_idx,
                                        const std::optional<at::Tensor>& initial_states) {
  checks::defined("causal_conv1d", "x", x);
  checks::defined("causal_conv1d", "weight", weight);
  const bool wants = x.requires_grad() || weight.requires_grad() ||
                     (causal_conv1d_impl::given(bias) && bias->requires_grad()) ||
                     (causal_conv1d_impl::given(initial_states) && initial_states->requires_grad());
  if (!at::GradMode::is_enabled() || !wants) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return CausalConv1dMambaFunction::mamba_op().call(x, weight, bias, activation, seq_idx, initial_states);
  }
  std::optional<std::string> act;
  if (activation.has_value()) act = std::string(*activation);
  return CausalConv1dMambaFunction::apply(x, weight, bias, seq_idx, initial_states, act);
}

causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward_autograd(
    const at::Tensor& g, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> mask, std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
    const std::optional<at::Tensor>& initial_states) {
  checks::defined("causal_conv1d_backward", "grad_out", g);
  checks::defined("causal_conv1d_backward", "x", x);
  checks::defined("causal_conv1d_backward", "weight", weight);
  std::optional<std::string> act;
  if (activation.has_value()) act = std::string(*activation);
  return CausalConv1dMambaOnce::call(g, x, weight, bias, seq_idx, initial_states, mask, act);
}

template <c10::DeviceType device>
at::Tensor causal_conv1d_mamba_autocast(const at::Tensor& x, const at::Tensor& weight,
                                        const std::optional<at::Tensor>& bias,
                                        std::optional<c10::string_view> activation,
                                        const std::optional<at::Tensor>& seq_idx,
                                        const std::optional<at::Tensor>& initial_states) {
  const autocast::LowerPrecision<device> lp;
  return CausalConv1dMambaFunction::mamba_op().call(lp.cast(x), lp.cast(weight), lp.cast(bias), activation, seq_idx,
                                                    lp.cast(initial_states));
}

// Autocast: the autocast dtype, as aten::conv1d (a convolution); the casts are
// ops autograd records, so gradients reach float32 parameters as float32. The
// backward op keeps its inputs' dtype, as convolution_backward does.
template <c10::DeviceType device>
at::Tensor causal_conv1d_autocast(const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias) {
  const autocast::LowerPrecision<device> lp;
  return detail::causal_conv1d_op().call(lp.cast(x), lp.cast(weight), lp.cast(bias));
}

// The result of the decoding step, handed to the Function below as a value autograd does not take for an input.
struct Result {
  at::Tensor tensor;
};

// The node a recorded decoding step's result gets: its backward raises, with the reason.
class CausalConv1dUpdateNoGrad : public torch::autograd::Function<CausalConv1dUpdateNoGrad> {
 public:
  static at::Tensor forward(AutogradContext*, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            const Result& result) {
    return result.tensor;
  }

  static variable_list backward(AutogradContext*, variable_list) {
    TORCH_CHECK(false, "customops::", causal_conv1d_impl::kUpdate, ": the decoding step is inference only and has "
                "no gradient; train with causal_conv1d (the training call), and decode under torch.no_grad() or "
                "torch.inference_mode()");
  }
};

// The decoding step is inference only: it has no backward. As an ATen op without a derivative, a result that
// autograd would record gets a node that raises when a backward reaches it, with the reason; tracers (export,
// ExecuTorch's lowering) still pass through with parameters that require grad. A state that requires grad is
// refused: it is updated in place. The update bumps the state's version, as an in-place ATen op does (a tensor
// saved for a backward then fails loudly when it is used).
at::Tensor causal_conv1d_update_autograd(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                         const std::optional<at::Tensor>& bias,
                                         std::optional<c10::string_view> activation,
                                         const std::optional<at::Tensor>& cache_seqlens,
                                         const std::optional<at::Tensor>& conv_state_indices) {
  const char* op = causal_conv1d_impl::kUpdate;
  checks::defined(op, "x", x);
  checks::defined(op, "conv_state", conv_state);
  checks::defined(op, "weight", weight);
  TORCH_CHECK(!(at::GradMode::is_enabled() && conv_state.requires_grad()), "customops::", op,
              ": conv_state requires grad, but the decoding step updates it in place and has no gradient");
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = detail::causal_conv1d_update_op().call(x, conv_state, weight, bias, activation, cache_seqlens,
                                                 conv_state_indices);
  }
  torch::autograd::impl::bump_version(conv_state);
  const bool wants =
      x.requires_grad() || weight.requires_grad() || (causal_conv1d_impl::given(bias) && bias->requires_grad());
  if (at::GradMode::is_enabled() && wants) return CausalConv1dUpdateNoGrad::apply(x, weight, bias, Result{out});
  return out;
}

// Autocast: as the training call, the convolution runs in a lower precision, but in conv_state's dtype, which
// the step updates in place and so cannot cast (a state made by a prefill under autocast has the autocast dtype).
template <c10::DeviceType device>
at::Tensor causal_conv1d_update_autocast(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                         const std::optional<at::Tensor>& bias,
                                         std::optional<c10::string_view> activation,
                                         const std::optional<at::Tensor>& cache_seqlens,
                                         const std::optional<at::Tensor>& conv_state_indices) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
  checks::defined(causal_conv1d_impl::kUpdate, "conv_state", conv_state);
  const auto dtype = conv_state.scalar_type();
  const auto cast = [&](const auto& t) { return at::autocast::cached_cast(dtype, t, device); };
  return detail::causal_conv1d_update_op().call(cast(x), conv_state, cast(weight), cast(bias), activation,
                                                cache_seqlens, conv_state_indices);
}

template <c10::DeviceType device>
void register_autocast(torch::Library& m) {
  m.impl("causal_conv1d", &causal_conv1d_autocast<device>);
  m.impl("causal_conv1d.mamba", &causal_conv1d_mamba_autocast<device>);
  m.impl("causal_conv1d.update", &causal_conv1d_update_autocast<device>);
  autocast::keep_input_dtype(m, {"causal_conv1d_backward", "causal_conv1d_backward.mamba"});
}

at::Tensor& causal_conv1d_out(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                              at::Tensor& out) {
  return out_variant::into("causal_conv1d.out", detail::causal_conv1d_op().call(x, weight, bias), out);
}

at::Tensor& causal_conv1d_update_out(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias,
                                     std::optional<c10::string_view> activation,
                                     const std::optional<at::Tensor>& cache_seqlens,
                                     const std::optional<at::Tensor>& conv_state_indices, at::Tensor& out) {
  return out_variant::into("causal_conv1d.update_out",
                           detail::causal_conv1d_update_op().call(x, conv_state, weight, bias, activation,
                                                                  cache_seqlens, conv_state_indices),
                           out);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("causal_conv1d", CUSTOMOPS_CPU_KERNEL(causal_conv1d));
  m.impl("causal_conv1d_backward", CUSTOMOPS_CPU_KERNEL(causal_conv1d_backward));
  m.impl("causal_conv1d.mamba", CUSTOMOPS_CPU_KERNEL(causal_conv1d_mamba));
  m.impl("causal_conv1d_backward.mamba", CUSTOMOPS_CPU_KERNEL(causal_conv1d_mamba_backward));
  m.impl("causal_conv1d.update", CUSTOMOPS_CPU_KERNEL(causal_conv1d_update));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("causal_conv1d", &customops::cuda::causal_conv1d);
  m.impl("causal_conv1d_backward", &customops::cuda::causal_conv1d_backward);
  m.impl("causal_conv1d.mamba", &customops::cuda::causal_conv1d_mamba);
  m.impl("causal_conv1d_backward.mamba", &customops::cuda::causal_conv1d_mamba_backward);
  m.impl("causal_conv1d.update", &customops::cuda::causal_conv1d_update);
}
#endif

TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {
  m.impl("causal_conv1d.out", TORCH_FN(customops::causal_conv1d_out));
  m.impl("causal_conv1d.update_out", TORCH_FN(customops::causal_conv1d_update_out));
}

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("causal_conv1d", &customops::meta::causal_conv1d);
  m.impl("causal_conv1d_backward", &customops::meta::causal_conv1d_backward);
  m.impl("causal_conv1d.mamba", &customops::meta::causal_conv1d_mamba);
  m.impl("causal_conv1d_backward.mamba", &customops::meta::causal_conv1d_mamba_backward);
  m.impl("causal_conv1d.update", &customops::meta::causal_conv1d_update);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("causal_conv1d", &customops::causal_conv1d_autograd);
  m.impl("causal_conv1d_backward", &customops::causal_conv1d_backward_autograd);
  m.impl("causal_conv1d.mamba", &customops::causal_conv1d_mamba_autograd);
  m.impl("causal_conv1d_backward.mamba", &customops::causal_conv1d_mamba_backward_autograd);
  m.impl("causal_conv1d.update", &customops::causal_conv1d_update_autograd);
}

CUSTOMOPS_AUTOCAST_IMPL(customops::register_autocast)
