// trilinear_interpolation.out for ExecuTorch's runtime: the checks of kernels/trilinear.h on ExecuTorch's tensors,
// then the maths of kernels/core/trilinear.h, as libtorch's CPU kernel runs it.
#include "kernels/core/trilinear.h"
#include "kernels/executorch/common.h"

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <vector>

namespace customops::executorch_kernels {
namespace {

constexpr const char* kOp = "trilinear_interpolation.out";

Tensor& trilinear_interpolation_out(KernelRuntimeContext& ctx, const Tensor& feats, const Tensor& points,
                                    Tensor& out) {
  // scaffold: the arguments' checks, the result resized |
  CUSTOMOPS_ET_CHECK(ctx, floating(feats) && floating(points), out, "trilinear_interpolation",
                     "expected floating feats and points, got dtypes %d and %d", int(feats.scalar_type()),
                     int(points.scalar_type()));
  CUSTOMOPS_ET_CHECK(ctx, feats.dim() == 3 && feats.size(1) == trilinear::kCorners, out, "trilinear_interpolation",
                     "expected feats of shape (N, 8, F), got %zu dimensions", size_t(feats.dim()));
  CUSTOMOPS_ET_CHECK(ctx, points.dim() == 2 && points.size(1) == 3, out, "trilinear_interpolation",
                     "expected points of shape (N, 3), got %zu dimensions", size_t(points.dim()));
  CUSTOMOPS_ET_CHECK(ctx, feats.size(0) == points.size(0), out, "trilinear_interpolation",
                     "expected feats and points to have the same N, got %zd and %zd", ssize_t(feats.size(0)),
                     ssize_t(points.size(0)));
  CUSTOMOPS_ET_CHECK(ctx, out.scalar_type() == feats.scalar_type(), out, "trilinear_interpolation",
                     "expected out of feats' dtype");
  CUSTOMOPS_ET_CHECK(ctx, contiguous(feats) && contiguous(points) && contiguous(out), out, "trilinear_interpolation",
                     "expected feats, points and out in the default dim order");
  const int64_t N = feats.size(0), F = feats.size(2);
  const ::executorch::aten::SizesType sizes[2] = {::executorch::aten::SizesType(N),
                                                  ::executorch::aten::SizesType(F)};
  CUSTOMOPS_ET_CHECK(ctx, ::executorch::runtime::resize_tensor(out, {sizes, 2}) == ::executorch::runtime::Error::Ok,
                     out, "trilinear_interpolation", "could not resize out to (%zd, %zd)", ssize_t(N), ssize_t(F));
  // scaffold-end
  // scaffold: the kernel: the core's maths over the rows, in parallel | CUSTOMOPS_ET_CHECK(ctx, false, out, "trilinear_interpolation", "TODO(trilinear_interpolation): the kernel"); return out;
  if (out.numel() == 0) return out;
  // Points of any floating dtype are read as the accumulation type, the values libtorch's kernel computes with
  // after converting them (kernels/trilinear.h, kernel_points).
  ET_SWITCH_FLOATHBF16_TYPES(feats.scalar_type(), ctx, kOp, scalar_t, [&] {
    ET_SWITCH_FLOATHBF16_TYPES(points.scalar_type(), ctx, kOp, point_t, [&] {
      const scalar_t* f = feats.const_data_ptr<scalar_t>();
      const point_t* p = points.const_data_ptr<point_t>();
      scalar_t* o = out.mutable_data_ptr<scalar_t>();
      ::executorch::extension::parallel_for(0, N, grain(trilinear::kCorners * F), [&](int64_t begin, int64_t end) {
        std::vector<opmath_t<scalar_t>> acc(F);
        trilinear::forward_rows(f, p, o, F, begin, end, acc.data());
      });
    });
  });
  return out;
  // scaffold-end
}

} // namespace
} // namespace customops::executorch_kernels

EXECUTORCH_LIBRARY(customops, "trilinear_interpolation.out",
                   customops::executorch_kernels::trilinear_interpolation_out);
