#include "kernels/fold.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <limits>

namespace customops::fold {
namespace {

void check_pair(const char* op, const char* arg, at::IntArrayRef v, int64_t min, const char* expected) {
  TORCH_CHECK(v.size() == 2, "customops::", op, ": expected ", arg, " to have 2 elements (height, width), got ",
              v.size());
  TORCH_CHECK(v[0] >= min && v[1] >= min, "customops::", op, ": expected ", arg, " to be ", expected, ", got ",
              v);
}

} // namespace

Window window(const char* op, at::IntArrayRef kernel_size, at::IntArrayRef dilation, at::IntArrayRef padding,
              at::IntArrayRef stride) {
  check_pair(op, "kernel_size", kernel_size, 1, "positive");
  check_pair(op, "dilation", dilation, 1, "positive");
  check_pair(op, "padding", padding, 0, "non-negative");
  check_pair(op, "stride", stride, 1, "positive");
  // The window arithmetic of every kernel then fits int64: 2*padding, the
  // dilated extent d*(k-1) and the taps kh*kw (a product that wrapped to 0
  // once divided by zero: SIGFPE).
  constexpr int64_t kMaxPadding = std::numeric_limits<int64_t>::max() / 2;
  TORCH_CHECK(padding[0] <= kMaxPadding && padding[1] <= kMaxPadding, "customops::", op,
              ": expected padding to be at most ", kMaxPadding, " (twice it must fit int64), got ", padding);
  for (int i = 0; i < 2; ++i) {
    TORCH_CHECK(checks::mul(dilation[i], kernel_size[i] - 1).has_value(), "customops::", op,
                ": the kernel's extent dilation * (kernel_size - 1) overflows int64, got dilation ", dilation,
                " and kernel_size ", kernel_size);
  }
  TORCH_CHECK(checks::mul(kernel_size[0], kernel_size[1]).has_value(), "customops::", op,
              ": the product of kernel_size ", kernel_size, " overflows int64");
  return {kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]};
}

void check_image(const char* op, const char* arg, const at::Tensor& input) {
  checks::floating(op, arg, input);
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "customops::", op, ": expected ", arg,
              " to be a 3-D (C, H, W) or 4-D (N, C, H, W) tensor, got ", input.dim(), "-D");
  // A batch of 0 images is fine; an image of no pixels or channels is not.
  for (int64_t d = -3; d < 0; ++d) {
    TORCH_CHECK(holds(input.sym_size(d) > 0), "customops::", op, ": expected ", arg,
                " to have non-empty C, H and W dimensions, got ", input.sym_sizes());
  }
  checks::dense_fits(op, arg, input);
}

void check_columns(const char* op, const char* arg, const at::Tensor& input, const Window& w) {
  checks::floating(op, arg, input);
  TORCH_CHECK(input.dim() == 2 || input.dim() == 3, "customops::", op, ": expected ", arg,
              " to be a 2-D (C*kh*kw, L) or 3-D (N, C*kh*kw, L) tensor, got ", input.dim(), "-D");
  const auto rows = input.sym_size(-2);
  TORCH_CHECK(holds(rows > 0 && rows % (w.kh * w.kw) == 0), "customops::", op, ": expected ", arg,
              "'s dimension ", input.dim() - 2, " (", rows, ") to be a positive multiple of kernel_size's product (",
              w.kh * w.kw, ")");
  checks::dense_fits(op, arg, input);
}

Plan plan_im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                 at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto w = window("im2col", kernel_size, dilation, padding, stride);
  const auto sizes = im2col_sizes<int64_t>("im2col", "input", input, w);
  const bool batched = input.dim() == 4;
  const auto x = input.contiguous();
  const int64_t N = batched ? x.size(0) : 1, C = x.size(-3), H = x.size(-2), W = x.size(-1);
  const int64_t oh = positions<int64_t>("im2col", "height", H, w.kh, w.dh, w.ph, w.sh);
  const int64_t ow = positions<int64_t>("im2col", "width", W, w.kw, w.dw, w.pw, w.sw);
  return {x, at::empty(sizes, x.options()), w, N, C, H, W, oh, ow};
}

Plan plan_col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                 at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto w = window("col2im", kernel_size, dilation, padding, stride);
  const auto sizes = col2im_sizes<int64_t>("col2im", "input", "output_size", input, output_size, w);
  const auto geo = col2im_geometry<int64_t>(input.sizes(), output_size, w);
  const bool batched = input.dim() == 3;
  const auto cols = input.contiguous();
  const int64_t N = batched ? cols.size(0) : 1, C = geo.channels, H = output_size[0], W = output_size[1];
  return {cols, at::empty(sizes, cols.options()), w, N, C, H, W, geo.out_h, geo.out_w};
}

} // namespace customops::fold
