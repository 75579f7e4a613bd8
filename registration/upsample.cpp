// Kernels of the upsample family for every dispatch key, and its autograd.
// The resize is linear in its input, and its backward is its adjoint: each
// one's gradient is the other, so neither saves a tensor.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "kernels/upsample.h"
#include "ops/src/upsample_ops.h"
#include "registration/autocast.h"

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void save_size(AutogradContext* ctx, const at::Tensor& t, c10::string_view mode) {
  ctx->saved_data["h"] = t.sym_size(2);
  ctx->saved_data["w"] = t.sym_size(3);
  ctx->saved_data["mode"] = std::string(mode);
}

std::vector<c10::SymInt> saved_size(AutogradContext* ctx) {
  return {ctx->saved_data["h"].toSymInt(), ctx->saved_data["w"].toSymInt()};
}

class ResizeFunction : public torch::autograd::Function<ResizeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::SymIntArrayRef size,
                            c10::string_view mode) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto out = detail::upsample_bilinear2d_op().call(input, size, mode);
    save_size(ctx, input, mode);  // after the op has checked that input is 4-D
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto mode = ctx->saved_data["mode"].toStringRef();
    return {detail::upsample_bilinear2d_backward_op().call(grads[0], saved_size(ctx), mode), {}, {}};
  }
};

class ResizeBackwardFunction : public torch::autograd::Function<ResizeBackwardFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& grad_out, c10::SymIntArrayRef size,
                            c10::string_view mode) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto out = detail::upsample_bilinear2d_backward_op().call(grad_out, size, mode);
    save_size(ctx, grad_out, mode);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto mode = ctx->saved_data["mode"].toStringRef();
    return {detail::upsample_bilinear2d_op().call(grads[0], saved_size(ctx), mode), {}, {}};
  }
};

at::Tensor resize_autograd(const at::Tensor& input, c10::SymIntArrayRef size, c10::string_view mode) {
  if (!at::GradMode::is_enabled() || !input.requires_grad()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::upsample_bilinear2d_op().call(input, size, mode);
  }
  return ResizeFunction::apply(input, size, mode);
}

at::Tensor resize_backward_autograd(const at::Tensor& grad_out, c10::SymIntArrayRef size, c10::string_view mode) {
  return ResizeBackwardFunction::apply(grad_out, size, mode);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("upsample_bilinear2d", CUSTOMOPS_CPU_KERNEL(upsample_bilinear2d));
  m.impl("upsample_bilinear2d_backward", CUSTOMOPS_CPU_KERNEL(upsample_bilinear2d_backward));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("upsample_bilinear2d", &customops::cuda::upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", &customops::cuda::upsample_bilinear2d_backward);
}
#endif

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("upsample_bilinear2d", &customops::meta::upsample_bilinear2d);
  m.impl("upsample_bilinear2d_backward", &customops::meta::upsample_bilinear2d_backward);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("upsample_bilinear2d", &customops::resize_autograd);
  m.impl("upsample_bilinear2d_backward", &customops::resize_backward_autograd);
}

// Autocast: upsample_bilinear2d runs in its input's dtype, as F.interpolate does.
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("upsample_bilinear2d", "upsample_bilinear2d_backward")
