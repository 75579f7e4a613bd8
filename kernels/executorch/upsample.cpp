// upsample_bilinear2d.out for ExecuTorch's runtime: the checks of kernels/upsample.h on ExecuTorch's tensors
// (contiguous or channels_last dim order), then the coordinate maths and loops of kernels/core/upsample.h, as
// libtorch's CPU kernel runs them.
#include "kernels/core/upsample.h"
#include "kernels/executorch/common.h"

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <string_view>

namespace customops::executorch_kernels {
namespace {

using ::executorch::aten::SizesType;

Tensor& upsample_bilinear2d_out(KernelRuntimeContext& ctx, const Tensor& input,
                                ::executorch::aten::ArrayRef<int64_t> output_size,
                                ::executorch::aten::string_view coordinate_mode, Tensor& out) {
  upsample::Mode mode;
  const std::string_view mode_name(coordinate_mode.data(), coordinate_mode.size());
  CUSTOMOPS_ET_CHECK(ctx, upsample::mode_from(mode_name, &mode), out, "upsample_bilinear2d",
                     "unknown coordinate_mode; expected one of half_pixel, align_corners, asymmetric");
  CUSTOMOPS_ET_CHECK(ctx, floating(input) && input.dim() == 4, out, "upsample_bilinear2d",
                     "expected a floating 4-D (N, C, H, W) input, got %zu dimensions", size_t(input.dim()));
  CUSTOMOPS_ET_CHECK(ctx, output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0, out,
                     "upsample_bilinear2d", "expected output_size to be 2 positive values");
  const int64_t N = input.size(0), C = input.size(1), IH = input.size(2), IW = input.size(3);
  const int64_t OH = output_size[0], OW = output_size[1];
  CUSTOMOPS_ET_CHECK(ctx, IH > 0 && IW > 0, out, "upsample_bilinear2d", "expected a non-empty input plane");
  // (tensor_is_channels_last_dim_order would log an error for every contiguous input.)
  const bool channels_last = !contiguous(input) && ::executorch::runtime::is_channels_last_dim_order(
                                                       input.dim_order().data(), size_t(input.dim()));
  CUSTOMOPS_ET_CHECK(ctx, (contiguous(input) || channels_last) &&
                              ::executorch::runtime::tensors_have_same_dim_order(input, out),
                     out, "upsample_bilinear2d",
                     "expected input in the default or channels_last dim order, and out in input's");
  CUSTOMOPS_ET_CHECK(ctx, out.scalar_type() == input.scalar_type(), out, "upsample_bilinear2d",
                     "expected out of input's dtype");
  const SizesType sizes[4] = {SizesType(N), SizesType(C), SizesType(OH), SizesType(OW)};
  CUSTOMOPS_ET_CHECK(ctx, ::executorch::runtime::resize_tensor(out, {sizes, 4}) == ::executorch::runtime::Error::Ok,
                     out, "upsample_bilinear2d", "could not resize out to (N, C, output_size)");
  if (out.numel() == 0) return out;
  ET_SWITCH_FLOATHBF16_TYPES(input.scalar_type(), ctx, "upsample_bilinear2d.out", scalar_t, [&] {
    using acc_t = opmath_t<scalar_t>;
    const upsample::Taps<acc_t> ty(upsample::Axis<acc_t>::make(mode, IH, OH));
    const upsample::Taps<acc_t> tx(upsample::Axis<acc_t>::make(mode, IW, OW));
    const scalar_t* src = input.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    if (channels_last) {
      ::executorch::extension::parallel_for(0, N * OH * OW, grain(C), [&](int64_t begin, int64_t end) {
        upsample::forward_nhwc_pixels(src, dst, ty, tx, C, IH, IW, OH, OW, begin, end);
      });
    } else {
      ::executorch::extension::parallel_for(0, N * C * OH, grain(OW), [&](int64_t begin, int64_t end) {
        upsample::forward_nchw_rows(src, dst, ty, tx, IH, IW, OH, OW, begin, end);
      });
    }
  });
  return out;
}

} // namespace
} // namespace customops::executorch_kernels

EXECUTORCH_LIBRARY(customops, "upsample_bilinear2d.out", customops::executorch_kernels::upsample_bilinear2d_out);
