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
    // One task item is one output row: a fixed (n, c, i, j) across all windows.
    at::parallel_for(0, N * rows, grain(L), [&](int64_t begin, int64_t end) {
      for (int64_t nr = begin; nr < end; ++nr) {
        const int64_t n = nr / rows, r = nr % rows;
        const int64_t c = r / (w.kh * w.kw), i = r / w.kw % w.kh, j = r % w.kw;
        const scalar_t* plane = src + (n * C + c) * H * W;
        scalar_t* row = dst + nr * L;
        for (int64_t y = 0; y < oh; ++y) {
          scalar_t* o = row + y * ow;
          const int64_t h = y * w.sh - w.ph + i * w.dh;
          if (h < 0 || h >= H) {
            std::fill(o, o + ow, scalar_t(0));
            continue;
          }
          const scalar_t* line = plane + h * W;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t col = xo * w.sw - w.pw + j * w.dw;
            o[xo] = (col >= 0 && col < W) ? line[col] : scalar_t(0);
          }
        }
      }
    });
  });
}

void col2im_into(const fold::Plan& plan) {
  const at::Tensor& cols = plan.input;
  const at::Tensor& out = plan.output;
  const fold::Window& w = plan.w;
  const int64_t N = plan.N, C = plan.C, H = plan.H, W = plan.W, oh = plan.out_h, ow = plan.out_w;
  const int64_t L = oh * ow;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, cols.scalar_type(), "col2im_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* src = cols.const_data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    // One task item is one (n, c) plane, which a single thread accumulates
    // window entry by window entry in a fixed order: no atomics, identical
    // results run to run, and no per-pixel division (unlike the GPU's gather).
    at::parallel_for(0, N * C, grain(H * W * w.kh * w.kw), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> acc(H * W);
      for (int64_t nc = begin; nc < end; ++nc) {
        std::fill(acc.begin(), acc.end(), opmath_t(0));
        const scalar_t* planes = src + nc * w.kh * w.kw * L;
        for (int64_t i = 0; i < w.kh; ++i) {
          for (int64_t j = 0; j < w.kw; ++j) {
            const scalar_t* row = planes + (i * w.kw + j) * L;
            for (int64_t y = 0; y < oh; ++y) {
              const int64_t h = y * w.sh - w.ph + i * w.dh;
              if (h < 0 || h >= H) continue;
              opmath_t* line = acc.data() + h * W;
              for (int64_t x = 0; x < ow; ++x) {
                const int64_t col = x * w.sw - w.pw + j * w.dw;
                if (col >= 0 && col < W) line[col] += static_cast<opmath_t>(row[y * ow + x]);
              }
            }
          }
        }
        std::copy(acc.begin(), acc.end(), dst + nc * H * W);
      }
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
