#include "kernels/fold.h"
#include "kernels/cpu/common/parallel.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <vector>

namespace customops::cpu::CPU_CAPABILITY {

void im2col_into(const fold::Plan& plan) {
  const at::Tensor& x = plan.input;
  const at::Tensor& out = plan.output;
  const fold::Window& w = plan.w;
  const int64_t N = plan.N, C = plan.C, H = plan.H, W = plan.W, oh = plan.out_h, ow = plan.out_w;
  const int64_t rows = C * w.kh * w.kw, L = oh * ow;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "im2col_cpu", [&] {
    const scalar_t* src = x.const_data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    // One task item is one output row.
    at::parallel_for(0, N * rows, grain(L), [&](int64_t begin, int64_t end) {
      fold::im2col_rows(src, dst, w, C, H, W, oh, ow, begin, end);
    });
  });
}

void col2im_into(const fold::Plan& plan) {
  const at::Tensor& cols = plan.input;
  const at::Tensor& out = plan.output;
  const fold::Window& w = plan.w;
  const int64_t N = plan.N, C = plan.C, H = plan.H, W = plan.W, oh = plan.out_h, ow = plan.out_w;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, cols.scalar_type(), "col2im_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* src = cols.const_data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    // One task item is one (n, c) plane, which a single thread accumulates.
    at::parallel_for(0, N * C, grain(H * W * w.kh * w.kw), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> acc(H * W);
      fold::col2im_planes(src, dst, w, H, W, oh, ow, begin, end, acc.data());
    });
  });
}

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto plan = fold::plan_im2col(input, kernel_size, dilation, padding, stride);
  im2col_into(plan);
  return plan.output;
}

at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto plan = fold::plan_col2im(input, output_size, kernel_size, dilation, padding, stride);
  col2im_into(plan);
  return plan.output;
}

} // namespace customops::cpu::CPU_CAPABILITY
