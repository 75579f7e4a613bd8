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

class __Op__Function : public torch::autograd::Function<__Op__Function> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::__op___op().call(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {detail::__op___backward_op().call(grads[0], saved[0])};
  }
};

// The backward op maps (grad_out, x) to x's gradient; its own backward (the double backward) gives, for an
// upstream gradient of that gradient, the gradients of grad_out and of x, in ATen operations so that they
// differentiate further. For an op linear in x, grad_out's is the op of the upstream gradient and x's is zero.
class __Op__BackwardFunction : public torch::autograd::Function<__Op__BackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& x) {
    ctx->save_for_backward({g, x});
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::__op___backward_op().call(g, x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(false, "customops::__op___backward: TODO(__op__): its gradients (the double backward)");
    return {at::Tensor(), at::Tensor()};
  }
};

at::Tensor __op___autograd(const at::Tensor& x) {
  // None fails here with its name, not in autograd's bookkeeping.
  checks::defined("__op__", "x", x);
  if (!at::GradMode::is_enabled() || !x.requires_grad()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::__op___op().call(x);
  }
  return __Op__Function::apply(x);
}

at::Tensor __op___backward_autograd(const at::Tensor& g, const at::Tensor& x) {
  checks::defined("__op___backward", "grad_out", g);
  checks::defined("__op___backward", "x", x);
  return __Op__BackwardFunction::apply(g, x);
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

// Autocast: the policy of the op's PyTorch counterpart (registration/autocast.h), and why: its input's dtype
// (elementwise, resampling, gathers, pooling) or the lower precision (convolutions, matmuls).
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("__op__", "__op___backward")  // TODO(__op__): this, or lower precision
