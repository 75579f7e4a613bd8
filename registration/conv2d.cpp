// Kernels of the convolution family (conv2d, depthwise_conv2d and their
// backward ops) for every dispatch key, and their autograd, written once for
// both ops: depthwise is conv2d with one group per input channel, so the same
// formulas give both ops' first and second derivatives.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <customops/conv.h>

#include "kernels/conv2d.h"
#include "registration/autocast.h"
#include "registration/conv_grads.h"
#include "registration/out_variant.h"

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Mask = std::array<bool, 3>;

struct Conv2dOps {
  static at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                            at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t groups) {
    return detail::conv2d_op().call(x, w, b, s, p, d, groups);
  }
  static detail::Grads backward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef s,
                                at::IntArrayRef p, at::IntArrayRef d, int64_t groups, Mask mask) {
    return detail::conv2d_backward_op().call(g, x, w, s, p, d, groups, mask);
  }
};

struct DepthwiseOps {  // groups is always 1 here and unused
  static at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                            at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t) {
    return detail::depthwise_conv2d_op().call(x, w, b, s, p, d);
  }
  static detail::Grads backward(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef s,
                                at::IntArrayRef p, at::IntArrayRef d, int64_t, Mask mask) {
    return detail::depthwise_conv2d_backward_op().call(g, x, w, s, p, d, mask);
  }
};

struct Params {
  std::vector<int64_t> s, p, d;
  int64_t groups;
};

void save_params(AutogradContext* ctx, at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t groups) {
  ctx->saved_data["s"] = s.vec();
  ctx->saved_data["p"] = p.vec();
  ctx->saved_data["d"] = d.vec();
  ctx->saved_data["groups"] = groups;
}

Params load_params(AutogradContext* ctx) {
  auto& sd = ctx->saved_data;
  return {sd["s"].toIntVector(), sd["p"].toIntVector(), sd["d"].toIntVector(), sd["groups"].toInt()};
}

template <typename Ops>
class ConvFunction : public torch::autograd::Function<ConvFunction<Ops>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const std::optional<at::Tensor>& b, at::IntArrayRef s, at::IntArrayRef p,
                            at::IntArrayRef d, int64_t groups) {
    ctx->save_for_backward({x, w});
    save_params(ctx, s, p, d, groups);
    ctx->saved_data["has_bias"] = b.has_value() && b->defined();
    at::AutoDispatchBelowADInplaceOrView guard;
    return Ops::forward(x, w, b, s, p, d, groups);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto q = load_params(ctx);
    const Mask mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                    ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)};
    auto [gx, gw, gb] = Ops::backward(grads[0], saved[0], saved[1], q.s, q.p, q.d, q.groups, mask);
    return {gx, gw, gb, {}, {}, {}, {}};
  }
};

// The backward op is bilinear; its derivatives are convolutions and backward
// ops again (registration/conv_grads.h). Autograd Functions cannot return undefined tensors, so this one returns only
// the gradients output_mask asks for; apply() puts them back in their places.
template <typename Ops>
class ConvBackwardFunction : public torch::autograd::Function<ConvBackwardFunction<Ops>> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,
                               at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t groups,
                               Mask mask) {
    ctx->save_for_backward({g, x, w});
    save_params(ctx, s, p, d, groups);
    ctx->saved_data["mask"] = c10::List<bool>({mask[0], mask[1], mask[2]});
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [gx, gw, gb] = Ops::backward(g, x, w, s, p, d, groups, mask);
    variable_list out;
    for (auto* t : {&gx, &gw, &gb}) {
      if (t->defined()) out.push_back(*t);
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &g = saved[0], &x = saved[1], &w = saved[2];
    const auto q = load_params(ctx);
    const auto mask = ctx->saved_data["mask"].toBoolList();
    at::Tensor gg[3];
    for (size_t k = 0, next = 0; k < 3; ++k) {
      if (mask[k]) gg[k] = grads[next++];
    }
    const auto convolve = [&](const at::Tensor& x_, const at::Tensor& w_, const std::optional<at::Tensor>& b_) {
      return Ops::forward(x_, w_, b_, q.s, q.p, q.d, q.groups);
    };
    const auto adjoints = [&](const at::Tensor& g_, const at::Tensor& x_, const at::Tensor& w_, Mask m) {
      return Ops::backward(g_, x_, w_, q.s, q.p, q.d, q.groups, m);
    };
    const auto [dg, dx, dw] = conv_backward_grads(
        convolve, adjoints, {ctx->needs_input_grad(0), ctx->needs_input_grad(1), ctx->needs_input_grad(2)}, g, x, w,
        gg[0], gg[1], gg[2], 2);
    return {dg, dx, dw, {}, {}, {}, {}, {}};
  }

  static detail::Grads apply(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, at::IntArrayRef s,
                             at::IntArrayRef p, at::IntArrayRef d, int64_t groups, Mask mask) {
    const auto out = torch::autograd::Function<ConvBackwardFunction<Ops>>::apply(g, x, w, s, p, d, groups, mask);
    at::Tensor r[3];
    for (size_t k = 0, next = 0; k < 3; ++k) {
      if (mask[k]) r[k] = out[next++];
    }
    return {r[0], r[1], r[2]};
  }
};

// Whether autograd has anything to record: otherwise the kernels are called
// straight away, without a Function's bookkeeping (inference, benchmarks).
bool records(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) {
  return at::GradMode::is_enabled() &&
         (x.requires_grad() || w.requires_grad() || (b.has_value() && b->defined() && b->requires_grad()));
}

// None for a tensor fails here with its name, before autograd's bookkeeping
// would fail on it with a message that names nothing.
void check_defined(const char* op, const at::Tensor& x, const at::Tensor& w, const at::Tensor& g = {},
                   bool has_g = false) {
  if (has_g) checks::defined(op, "grad_out", g);
  checks::defined(op, "input", x);
  checks::defined(op, "weight", w);
}

at::Tensor conv2d_autograd(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                           at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t groups) {
  check_defined("conv2d", x, w);
  if (!records(x, w, b)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return Conv2dOps::forward(x, w, b, s, p, d, groups);
  }
  return ConvFunction<Conv2dOps>::apply(x, w, b, s, p, d, groups);
}

// A first backward (create_graph=False) runs with grad mode off: the backward
// op then records nothing either.
detail::Grads conv2d_backward_autograd(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,
                                       at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t groups,
                                       Mask mask) {
  check_defined("conv2d_backward", x, w, g, true);
  if (!records(x, w, g)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return Conv2dOps::backward(g, x, w, s, p, d, groups, mask);
  }
  return ConvBackwardFunction<Conv2dOps>::apply(g, x, w, s, p, d, groups, mask);
}

at::Tensor depthwise_autograd(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                              at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d) {
  check_defined("depthwise_conv2d", x, w);
  if (!records(x, w, b)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return DepthwiseOps::forward(x, w, b, s, p, d, 1);
  }
  return ConvFunction<DepthwiseOps>::apply(x, w, b, s, p, d, 1);
}

detail::Grads depthwise_backward_autograd(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,
                                          at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, Mask mask) {
  check_defined("depthwise_conv2d_backward", x, w, g, true);
  if (!records(x, w, g)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return DepthwiseOps::backward(g, x, w, s, p, d, 1, mask);
  }
  return ConvBackwardFunction<DepthwiseOps>::apply(g, x, w, s, p, d, 1, mask);
}

// Autocast: both convolutions run in the autocast dtype, as aten::conv2d does.
// Their backward ops pass through: autograd hands them the dtypes the forward
// ran in.
template <c10::DeviceType device>
at::Tensor conv2d_autocast(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                           at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, int64_t groups) {
  const autocast::LowerPrecision<device> lp;
  return Conv2dOps::forward(lp.cast(x), lp.cast(w), lp.cast(b), s, p, d, groups);
}

template <c10::DeviceType device>
at::Tensor depthwise_autocast(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                              at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d) {
  const autocast::LowerPrecision<device> lp;
  return DepthwiseOps::forward(lp.cast(x), lp.cast(w), lp.cast(b), s, p, d, 1);
}

template <c10::DeviceType device>
void register_autocast(torch::Library& m) {
  m.impl("conv2d", &conv2d_autocast<device>);
  m.impl("depthwise_conv2d", &depthwise_autocast<device>);
  autocast::keep_input_dtype(m, {"conv2d_backward", "depthwise_conv2d_backward"});
}

at::Tensor& depthwise_out(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b,
                          at::IntArrayRef s, at::IntArrayRef p, at::IntArrayRef d, at::Tensor& out) {
  return out_variant::into("depthwise_conv2d.out", detail::depthwise_conv2d_op().call(x, w, b, s, p, d), out);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {
  m.impl("depthwise_conv2d.out", TORCH_FN(customops::depthwise_out));
}

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("conv2d", CUSTOMOPS_CPU_KERNEL(conv2d));
  m.impl("conv2d_backward", CUSTOMOPS_CPU_KERNEL(conv2d_backward));
  m.impl("depthwise_conv2d", CUSTOMOPS_CPU_KERNEL(depthwise_conv2d));
  m.impl("depthwise_conv2d_backward", CUSTOMOPS_CPU_KERNEL(depthwise_conv2d_backward));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("conv2d", &customops::cuda::conv2d);
  m.impl("conv2d_backward", &customops::cuda::conv2d_backward);
  m.impl("depthwise_conv2d", &customops::cuda::depthwise_conv2d);
  m.impl("depthwise_conv2d_backward", &customops::cuda::depthwise_conv2d_backward);
}
#endif

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("conv2d", &customops::meta::conv2d);
  m.impl("conv2d_backward", &customops::meta::conv2d_backward);
  m.impl("depthwise_conv2d", &customops::meta::depthwise_conv2d);
  m.impl("depthwise_conv2d_backward", &customops::meta::depthwise_conv2d_backward);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("conv2d", &customops::conv2d_autograd);
  m.impl("conv2d_backward", &customops::conv2d_backward_autograd);
  m.impl("depthwise_conv2d", &customops::depthwise_autograd);
  m.impl("depthwise_conv2d_backward", &customops::depthwise_backward_autograd);
}

CUSTOMOPS_AUTOCAST_IMPL(customops::register_autocast)
