// Kernels of the upsample family for every dispatch key, and its autograd.
// The resize is linear in its input, and its backward is its adjoint: each
// one's gradient is the other, so neither saves a tensor.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <customops/upsample.h>

#include "kernels/upsample.h"
#include "registration/autocast.h"
#include "registration/out_variant.h"

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
  checks::defined("upsample_bilinear2d", "input", input);
  if (!at::GradMode::is_enabled() || !input.requires_grad()) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::upsample_bilinear2d_op().call(input, size, mode);
  }
  return ResizeFunction::apply(input, size, mode);
}

at::Tensor resize_backward_autograd(const at::Tensor& grad_out, c10::SymIntArrayRef size, c10::string_view mode) {
  checks::defined("upsample_bilinear2d_backward", "grad_out", grad_out);
  return ResizeBackwardFunction::apply(grad_out, size, mode);
}

// The CPU and CUDA kernels take the size as int64_t; the schema's is SymInt[2],
// and a SymInt below -2^62 is one the dispatcher cannot convert (its message
// names no argument): checked here first, then made concrete.
using ResizeKernel = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, c10::string_view);

template <bool backward>
at::Tensor resize_checked(ResizeKernel kernel, const at::Tensor& t, c10::SymIntArrayRef size, c10::string_view mode) {
  upsample::check_size<c10::SymInt>(backward ? "upsample_bilinear2d_backward" : "upsample_bilinear2d",
                                    backward ? "input_size" : "output_size", size);
  return kernel(t, C10_AS_INTARRAYREF_SLOW(size), mode);
}

at::Tensor resize_cpu(const at::Tensor& input, c10::SymIntArrayRef size, c10::string_view mode) {
  static const ResizeKernel kernel = CUSTOMOPS_CPU_KERNEL(upsample_bilinear2d);
  return resize_checked<false>(kernel, input, size, mode);
}

at::Tensor resize_backward_cpu(const at::Tensor& grad_out, c10::SymIntArrayRef size, c10::string_view mode) {
  static const ResizeKernel kernel = CUSTOMOPS_CPU_KERNEL(upsample_bilinear2d_backward);
  return resize_checked<true>(kernel, grad_out, size, mode);
}

#if defined(CUSTOMOPS_WITH_CUDA)
at::Tensor resize_cuda(const at::Tensor& input, c10::SymIntArrayRef size, c10::string_view mode) {
  return resize_checked<false>(&cuda::upsample_bilinear2d, input, size, mode);
}

at::Tensor resize_backward_cuda(const at::Tensor& grad_out, c10::SymIntArrayRef size, c10::string_view mode) {
  return resize_checked<true>(&cuda::upsample_bilinear2d_backward, grad_out, size, mode);
}
#endif

at::Tensor& upsample_bilinear2d_out(const at::Tensor& input, c10::SymIntArrayRef size, c10::string_view mode,
                                    at::Tensor& out) {
  return out_variant::into("upsample_bilinear2d.out", detail::upsample_bilinear2d_op().call(input, size, mode), out);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("upsample_bilinear2d", &customops::resize_cpu);
  m.impl("upsample_bilinear2d_backward", &customops::resize_backward_cpu);
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("upsample_bilinear2d", &customops::resize_cuda);
  m.impl("upsample_bilinear2d_backward", &customops::resize_backward_cuda);
}
#endif

TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {
  m.impl("upsample_bilinear2d.out", TORCH_FN(customops::upsample_bilinear2d_out));
}

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
