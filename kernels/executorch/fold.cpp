// im2col.out and col2im.out for ExecuTorch's runtime: the checks of kernels/fold.h on ExecuTorch's tensors, then
// the loops of kernels/core/fold.h, as libtorch's CPU kernels run them.
#include "kernels/core/fold.h"
#include "kernels/executorch/common.h"
#include "kernels/executorch/window.h"

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <vector>

namespace customops::executorch_kernels {
namespace {

Tensor& im2col_out(KernelRuntimeContext& ctx, const Tensor& input, IntList kernel_size, IntList dilation,
                   IntList padding, IntList stride, Tensor& out) {
  fold::Window w;
  if (!window(ctx, "im2col", kernel_size, dilation, padding, stride, &w)) return out;
  const bool batched = input.dim() == 4;
  CUSTOMOPS_ET_CHECK(ctx, floating(input) && (input.dim() == 3 || batched), out, "im2col",
                     "expected a floating 3-D (C, H, W) or 4-D (N, C, H, W) input, got %zu dimensions",
                     size_t(input.dim()));
  const int64_t N = batched ? input.size(0) : 1, C = input.size(input.dim() - 3), H = input.size(input.dim() - 2),
                W = input.size(input.dim() - 1);
  CUSTOMOPS_ET_CHECK(ctx, C > 0 && H > 0 && W > 0, out, "im2col", "expected non-empty C, H and W dimensions");
  CUSTOMOPS_ET_CHECK(ctx, fits(H, w.kh, w.dh, w.ph) && fits(W, w.kw, w.dw, w.pw), out, "im2col",
                     "the kernel is larger than the padded input");
  CUSTOMOPS_ET_CHECK(ctx, out.scalar_type() == input.scalar_type() && contiguous(input) && contiguous(out), out,
                     "im2col", "expected out of input's dtype, both in the default dim order");
  const int64_t oh = fold::window_count(H, w.kh, w.dh, w.ph, w.sh), ow = fold::window_count(W, w.kw, w.dw, w.pw, w.sw);
  const SizesType sizes[3] = {SizesType(N), SizesType(C * w.kh * w.kw), SizesType(oh * ow)};
  const IntList::size_type rank = batched ? 3 : 2;
  CUSTOMOPS_ET_CHECK(ctx,
                     ::executorch::runtime::resize_tensor(out, {sizes + (batched ? 0 : 1), rank}) ==
                         ::executorch::runtime::Error::Ok,
                     out, "im2col", "could not resize out");
  if (out.numel() == 0) return out;
  ET_SWITCH_FLOATHBF16_TYPES(input.scalar_type(), ctx, "im2col.out", scalar_t, [&] {
    const scalar_t* src = input.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    ::executorch::extension::parallel_for(0, N * C * w.kh * w.kw, grain(oh * ow), [&](int64_t begin, int64_t end) {
      fold::im2col_rows(src, dst, w, C, H, W, oh, ow, begin, end);
    });
  });
  return out;
}

Tensor& col2im_out(KernelRuntimeContext& ctx, const Tensor& input, IntList output_size, IntList kernel_size,
                   IntList dilation, IntList padding, IntList stride, Tensor& out) {
  fold::Window w;
  if (!window(ctx, "col2im", kernel_size, dilation, padding, stride, &w)) return out;
  const bool batched = input.dim() == 3;
  CUSTOMOPS_ET_CHECK(ctx, floating(input) && (input.dim() == 2 || batched), out, "col2im",
                     "expected a floating 2-D (C*kh*kw, L) or 3-D (N, C*kh*kw, L) input, got %zu dimensions",
                     size_t(input.dim()));
  CUSTOMOPS_ET_CHECK(ctx, output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0, out, "col2im",
                     "expected output_size to be 2 positive values");
  const int64_t N = batched ? input.size(0) : 1, rows = input.size(input.dim() - 2), L = input.size(input.dim() - 1);
  const int64_t H = output_size[0], W = output_size[1];
  CUSTOMOPS_ET_CHECK(ctx, rows > 0 && rows % (w.kh * w.kw) == 0, out, "col2im",
                     "expected input's rows (%zd) to be a positive multiple of kernel_size's product", ssize_t(rows));
  CUSTOMOPS_ET_CHECK(ctx, fits(H, w.kh, w.dh, w.ph) && fits(W, w.kw, w.dw, w.pw), out, "col2im",
                     "the kernel is larger than the padded output_size");
  const int64_t oh = fold::window_count(H, w.kh, w.dh, w.ph, w.sh), ow = fold::window_count(W, w.kw, w.dw, w.pw, w.sw);
  CUSTOMOPS_ET_CHECK(ctx, L == oh * ow, out, "col2im",
                     "expected input's last dimension to be %zd (%zd x %zd kernel windows), got %zd",
                     ssize_t(oh * ow), ssize_t(oh), ssize_t(ow), ssize_t(L));
  CUSTOMOPS_ET_CHECK(ctx, out.scalar_type() == input.scalar_type() && contiguous(input) && contiguous(out), out,
                     "col2im", "expected out of input's dtype, both in the default dim order");
  const int64_t C = rows / (w.kh * w.kw);
  const SizesType sizes[4] = {SizesType(N), SizesType(C), SizesType(H), SizesType(W)};
  const IntList::size_type rank = batched ? 4 : 3;
  CUSTOMOPS_ET_CHECK(ctx,
                     ::executorch::runtime::resize_tensor(out, {sizes + (batched ? 0 : 1), rank}) ==
                         ::executorch::runtime::Error::Ok,
                     out, "col2im", "could not resize out");
  if (out.numel() == 0) return out;
  ET_SWITCH_FLOATHBF16_TYPES(input.scalar_type(), ctx, "col2im.out", scalar_t, [&] {
    const scalar_t* src = input.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    ::executorch::extension::parallel_for(0, N * C, grain(H * W * w.kh * w.kw), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t<scalar_t>> acc(H * W);
      fold::col2im_planes(src, dst, w, H, W, oh, ow, begin, end, acc.data());
    });
  });
  return out;
}

} // namespace
} // namespace customops::executorch_kernels

EXECUTORCH_LIBRARY(customops, "im2col.out", customops::executorch_kernels::im2col_out);
EXECUTORCH_LIBRARY(customops, "col2im.out", customops::executorch_kernels::col2im_out);
