// depthwise_conv2d.out for ExecuTorch's runtime: the checks of kernels/conv2d.h on ExecuTorch's tensors, then the
// CPU forward of kernels/core/ (isa/depthwise_conv2d.cpp), as libtorch's CPU kernel runs it, for NCHW tensors
// (customops.executorch.conv lowers others by their decomposition).
#include "kernels/executorch/common.h"
#include "kernels/executorch/isa.h"
#include "kernels/executorch/window.h"

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <optional>

namespace customops::executorch_kernels {
namespace {

Tensor& depthwise_conv2d_out(KernelRuntimeContext& ctx, const Tensor& input, const Tensor& weight,
                             const std::optional<Tensor>& bias, IntList stride, IntList padding, IntList dilation,
                             Tensor& out) {
  CUSTOMOPS_ET_CHECK(ctx, floating(input) && input.dim() == 4, out, "depthwise_conv2d",
                     "expected a floating 4-D (N, C, H, W) input, got %zu dimensions", size_t(input.dim()));
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  CUSTOMOPS_ET_CHECK(ctx, weight.dim() == 4 && weight.size(1) == 1 && C > 0 && weight.size(0) % C == 0 &&
                              weight.size(0) > 0,
                     out, "depthwise_conv2d",
                     "expected weight of shape (C * multiplier, 1, kh, kw) with C = input.size(1) = %zd", ssize_t(C));
  const int64_t O = weight.size(0);
  fold::Window w;
  const int64_t kernel_size[2] = {weight.size(2), weight.size(3)};
  if (!window(ctx, "depthwise_conv2d", {kernel_size, 2}, dilation, padding, stride, &w)) return out;
  CUSTOMOPS_ET_CHECK(ctx, fits(H, w.kh, w.dh, w.ph) && fits(W, w.kw, w.dw, w.pw), out, "depthwise_conv2d",
                     "the kernel is larger than the padded input");
  const Tensor* b = bias.has_value() ? &bias.value() : nullptr;
  CUSTOMOPS_ET_CHECK(ctx, !b || (b->dim() == 1 && b->size(0) == O), out, "depthwise_conv2d",
                     "expected bias of shape (O,) with O = weight.size(0) = %zd", ssize_t(O));
  CUSTOMOPS_ET_CHECK(ctx, weight.scalar_type() == input.scalar_type() &&
                              (!b || b->scalar_type() == input.scalar_type()) &&
                              out.scalar_type() == input.scalar_type(),
                     out, "depthwise_conv2d", "expected weight, bias and out of input's dtype");
  CUSTOMOPS_ET_CHECK(ctx, contiguous(input) && contiguous(weight) && (!b || contiguous(*b)) && contiguous(out), out,
                     "depthwise_conv2d", "expected input, weight, bias and out in the default dim order");
  CUSTOMOPS_ET_CHECK(ctx, CUSTOMOPS_ET_KERNEL(depthwise_takes)(input, w, O / C), out, "depthwise_conv2d",
                     "padding and dilation too large: the zero-padded plane that the kernel stages overflows int64");
  const SizesType sizes[4] = {SizesType(N), SizesType(O), SizesType(fold::window_count(H, w.kh, w.dh, w.ph, w.sh)),
                              SizesType(fold::window_count(W, w.kw, w.dw, w.pw, w.sw))};
  CUSTOMOPS_ET_CHECK(ctx, ::executorch::runtime::resize_tensor(out, {sizes, 4}) == ::executorch::runtime::Error::Ok,
                     out, "depthwise_conv2d", "could not resize out");
  if (out.numel() == 0) return out;
  CUSTOMOPS_ET_KERNEL(depthwise_forward)(ctx, input, weight, b, w, out);
  return out;
}

} // namespace
} // namespace customops::executorch_kernels

EXECUTORCH_LIBRARY(customops, "depthwise_conv2d.out", customops::executorch_kernels::depthwise_conv2d_out);
