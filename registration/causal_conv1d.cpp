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

// Autocast: the autocast dtype, as aten::conv1d (a convolution); the casts are
// ops autograd records, so gradients reach float32 parameters as float32. The
// backward op keeps its inputs' dtype, as convolution_backward does.
template <c10::DeviceType device>
at::Tensor causal_conv1d_autocast(const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias) {
  const autocast::LowerPrecision<device> lp;
  return detail::causal_conv1d_op().call(lp.cast(x), lp.cast(weight), lp.cast(bias));
}

template <c10::DeviceType device>
void register_autocast(torch::Library& m) {
  m.impl("causal_conv1d", &causal_conv1d_autocast<device>);
  autocast::keep_input_dtype(m, {"causal_conv1d_backward"});
}

at::Tensor& causal_conv1d_out(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                              at::Tensor& out) {
  return out_variant::into("causal_conv1d.out", detail::causal_conv1d_op().call(x, weight, bias), out);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("causal_conv1d", CUSTOMOPS_CPU_KERNEL(causal_conv1d));
  m.impl("causal_conv1d_backward", CUSTOMOPS_CPU_KERNEL(causal_conv1d_backward));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("causal_conv1d", &customops::cuda::causal_conv1d);
  m.impl("causal_conv1d_backward", &customops::cuda::causal_conv1d_backward);
}
#endif

TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {
  m.impl("causal_conv1d.out", TORCH_FN(customops::causal_conv1d_out));
}

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("causal_conv1d", &customops::meta::causal_conv1d);
  m.impl("causal_conv1d_backward", &customops::meta::causal_conv1d_backward);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("causal_conv1d", &customops::causal_conv1d_autograd);
  m.impl("causal_conv1d_backward", &customops::causal_conv1d_backward_autograd);
}

CUSTOMOPS_AUTOCAST_IMPL(customops::register_autocast)
