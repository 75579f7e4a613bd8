#include "kernels/trilinear.h"
#include "kernels/cpu/common/parallel.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <vector>

namespace customops::cpu::CPU_CAPABILITY {
namespace {

// scaffold: what the kernels use of the family's header |
using trilinear::Corners;
using trilinear::kCorners;
// scaffold-end

} // namespace

at::Tensor trilinear_interpolation(const at::Tensor& feats_in, const at::Tensor& points_in) {
  const auto plan = trilinear::plan_forward(feats_in, points_in);
  // scaffold: the CPU forward kernel | TORCH_CHECK(false, "customops::trilinear_interpolation: TODO(trilinear_interpolation)"); return plan.out;
  const at::Tensor &feats = plan.feats, &points = plan.points, &out = plan.out;
  const int64_t N = plan.N, F = plan.F;
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "trilinear_cpu", [&] {
    trilinear::with_point_type<scalar_t>(points, [&](auto point) {
      using point_t = decltype(point);
      using opmath_t = at::opmath_type<scalar_t>;
      const scalar_t* f = feats.const_data_ptr<scalar_t>();
      const point_t* p = points.const_data_ptr<point_t>();
      scalar_t* o = out.data_ptr<scalar_t>();
      at::parallel_for(0, N, grain(kCorners * F), [&](int64_t begin, int64_t end) {
        std::vector<opmath_t> acc(F);
        trilinear::forward_rows(f, p, o, F, begin, end, acc.data());
      });
    });
  });
  return out;
  // scaffold-end
}

trilinear::Grads trilinear_interpolation_backward(const at::Tensor& grad_in, const at::Tensor& feats_in,
                                                  const at::Tensor& points_in, std::array<bool, 2> output_mask) {
  const auto plan = trilinear::plan_backward(grad_in, feats_in, points_in, output_mask);
  // scaffold: the CPU backward kernel | TORCH_CHECK(false, "customops::trilinear_interpolation: TODO(trilinear_interpolation)"); return plan.result();
  const at::Tensor &grad = plan.grad, &feats = plan.feats, &points = plan.points;
  const at::Tensor &gf = plan.grad_feats, &gp = plan.grad_points;
  const int64_t N = plan.N, F = plan.F;
  if (N == 0 || (!gf.defined() && !gp.defined())) return plan.result();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, feats.scalar_type(), "trilinear_backward_cpu", [&] {
    trilinear::with_point_type<scalar_t>(points, [&](auto point) {
      using point_t = decltype(point);
      using opmath_t = at::opmath_type<scalar_t>;
      const scalar_t* g = grad.const_data_ptr<scalar_t>();
      const scalar_t* f = feats.const_data_ptr<scalar_t>();
      const point_t* p = points.const_data_ptr<point_t>();
      scalar_t* gf_out = gf.defined() ? gf.data_ptr<scalar_t>() : nullptr;
      point_t* gp_out = gp.defined() ? gp.data_ptr<point_t>() : nullptr;
      at::parallel_for(0, N, grain(2 * kCorners * F), [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          const Corners<opmath_t> c(p[3 * n], p[3 * n + 1], p[3 * n + 2]);
          const scalar_t* gn = g + n * F;
          if (gf_out) {
            for (int k = 0; k < kCorners; ++k) {
              const opmath_t w = c.weight(k);
              scalar_t* row = gf_out + (n * kCorners + k) * F;
              for (int64_t j = 0; j < F; ++j) row[j] = static_cast<scalar_t>(w * static_cast<opmath_t>(gn[j]));
            }
          }
          if (gp_out) {
            // d out / d p = sum_k d w_k / d p * (feats_k . g): one dot product per corner.
            opmath_t grad_p[3] = {0, 0, 0};
            for (int k = 0; k < kCorners; ++k) {
              const scalar_t* row = f + (n * kCorners + k) * F;
              opmath_t dot = 0;
              for (int64_t j = 0; j < F; ++j) dot += static_cast<opmath_t>(gn[j]) * static_cast<opmath_t>(row[j]);
              for (int d = 0; d < 3; ++d) grad_p[d] += c.derivative(k, d) * dot;
            }
            for (int d = 0; d < 3; ++d) gp_out[3 * n + d] = static_cast<point_t>(grad_p[d]);
          }
        }
      });
    });
  });
  return plan.result();
  // scaffold-end
}

} // namespace customops::cpu::CPU_CAPABILITY
