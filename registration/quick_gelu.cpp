// Kernels of the quick_gelu family for every dispatch key, and its autograd.
#include <ATen/ATen.h>
#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <customops/quick_gelu.h>

#include "kernels/quick_gelu.h"
#include "registration/autocast.h"

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor call_below_autograd(const at::Tensor& x) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return customops::quick_gelu(x);
}

class QuickGeluFunction : public torch::autograd::Function<QuickGeluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return call_below_autograd(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto x = ctx->get_saved_variables()[0];
    // Through the dispatcher, so the gradient is itself differentiable.
    return {customops::quick_gelu_backward(grads[0], x)};
  }
};

class QuickGeluBackwardFunction : public torch::autograd::Function<QuickGeluBackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_out, const at::Tensor& x) {
    ctx->save_for_backward({grad_out, x});
    at::AutoDispatchBelowADInplaceOrView guard;
    return customops::quick_gelu_backward(grad_out, x);
  }

  // Written in ATen ops so that higher derivatives keep working.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& grad_out = saved[0];
    const auto& x = saved[1];
    const auto& gg = grads[0];
    // scaffold: f''(x) in ATen operations, for the double backward | const auto f2 = at::zeros_like(x);
    // With s = sigmoid(a x): f'(x) = s (1 + a x (1 - s)) and f''(x) = a s (1 - s) (2 + a x (1 - 2 s)).
    const double a = quick_gelu_math::kAlpha;
    const auto s = at::sigmoid(x * a);
    const auto f2 = a * s * (1 - s) * (2 + a * x * (1 - 2 * s));
    // scaffold-end
    return {customops::quick_gelu_backward(gg, x), gg * grad_out * f2};
  }
};

at::Tensor quick_gelu_autograd(const at::Tensor& x) {
  // None fails here with its name, not in autograd's bookkeeping.
  checks::defined("quick_gelu", "x", x);
  return QuickGeluFunction::apply(x);
}

at::Tensor quick_gelu_backward_autograd(const at::Tensor& grad_out, const at::Tensor& x) {
  checks::defined("quick_gelu_backward", "grad_out", grad_out);
  checks::defined("quick_gelu_backward", "x", x);
  return QuickGeluBackwardFunction::apply(grad_out, x);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("quick_gelu", CUSTOMOPS_CPU_KERNEL(quick_gelu));
  m.impl("quick_gelu_backward", CUSTOMOPS_CPU_KERNEL(quick_gelu_backward));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("quick_gelu", &customops::cuda::quick_gelu);
  m.impl("quick_gelu_backward", &customops::cuda::quick_gelu_backward);
}
#endif

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("quick_gelu", &customops::meta::quick_gelu);
  m.impl("quick_gelu_backward", &customops::meta::quick_gelu_backward);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("quick_gelu", &customops::quick_gelu_autograd);
  m.impl("quick_gelu_backward", &customops::quick_gelu_backward_autograd);
}

// Autocast: quick_gelu runs in its input's dtype, as PyTorch's activations do.
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("quick_gelu", "quick_gelu_backward")
