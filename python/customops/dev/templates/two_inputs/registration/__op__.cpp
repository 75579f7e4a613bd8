// Kernels of __op__ for every dispatch key, and its autograd.
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <customops/__op__.h>

#include "kernels/__op__.h"
#include "registration/autocast.h"

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Mask = std::array<bool, 2>;

class __Op__Function : public torch::autograd::Function<__Op__Function> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    ctx->save_for_backward({a, b});
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::__op___op().call(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Mask mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    auto [grad_a, grad_b] = detail::__op___backward_op().call(grads[0], saved[0], saved[1], mask);
    return {grad_a, grad_b};
  }
};

// The backward op maps (grad_out, a, b) to the gradients of a and b that output_mask asks for; its own backward
// (the double backward) gives, for upstream gradients of those, the gradients of grad_out, a and b, in ATen
// operations so that they differentiate further. For an op linear in a and in b (a convolution), each is the op
// or the backward op on the upstream gradients.
class __Op__BackwardFunction : public torch::autograd::Function<__Op__BackwardFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& a, const at::Tensor& b,
                               Mask mask) {
    ctx->save_for_backward({g, a, b});
    ctx->saved_data["mask"] = c10::List<bool>({mask[0], mask[1]});
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [grad_a, grad_b] = detail::__op___backward_op().call(g, a, b, mask);
    variable_list out;
    for (auto* t : {&grad_a, &grad_b}) {
      if (t->defined()) out.push_back(*t);
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // grads: the upstream gradients of the gradients the mask (saved_data["mask"]) asked for, in that order.
    TORCH_CHECK(false, "customops::__op___backward: TODO(__op__): its gradients (the double backward)");
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }

  static detail::__Op__Grads apply(const at::Tensor& g, const at::Tensor& a, const at::Tensor& b, Mask mask) {
    const auto out = torch::autograd::Function<__Op__BackwardFunction>::apply(g, a, b, mask);
    at::Tensor r[2];
    for (size_t k = 0, next = 0; k < 2; ++k) {
      if (mask[k]) r[k] = out[next++];
    }
    return {r[0], r[1]};
  }
};

at::Tensor __op___autograd(const at::Tensor& a, const at::Tensor& b) {
  // None fails here with its name, not in autograd's bookkeeping.
  checks::defined("__op__", "a", a);
  checks::defined("__op__", "b", b);
  if (!at::GradMode::is_enabled() || !(a.requires_grad() || b.requires_grad())) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::__op___op().call(a, b);
  }
  return __Op__Function::apply(a, b);
}

detail::__Op__Grads __op___backward_autograd(const at::Tensor& g, const at::Tensor& a, const at::Tensor& b,
                                             Mask mask) {
  checks::defined("__op___backward", "grad_out", g);
  checks::defined("__op___backward", "a", a);
  checks::defined("__op___backward", "b", b);
  return __Op__BackwardFunction::apply(g, a, b, mask);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("__op__", CUSTOMOPS_CPU_KERNEL(__op__));
  m.impl("__op___backward", CUSTOMOPS_CPU_KERNEL(__op___backward));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("__op__", &customops::cuda::__op__);
  m.impl("__op___backward", &customops::cuda::__op___backward);
}
#endif

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("__op__", &customops::meta::__op__);
  m.impl("__op___backward", &customops::meta::__op___backward);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("__op__", &customops::__op___autograd);
  m.impl("__op___backward", &customops::__op___backward_autograd);
}

// Autocast: the policy of the op's PyTorch counterpart (registration/autocast.h), and why: its inputs' dtype
// (resampling, gathers) or the lower precision (convolutions, matmuls: CUSTOMOPS_AUTOCAST_IMPL).
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("__op__", "__op___backward")  // TODO(__op__): this, or lower precision
