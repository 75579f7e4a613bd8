#include "kernels/upsample.h"
#include "kernels/cpu/common/parallel.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <vector>

namespace customops::cpu::CPU_CAPABILITY {
namespace {

using upsample::Axis;
using upsample::Plan;
using upsample::Taps;

// For each input index i, the outputs that read it, [lo[i], lo[i] + count[i]),
// and their weights on i, from weights[start[i]] on.
template <typename opmath_t>
struct Readers {
  std::vector<int64_t> lo, count, start;
  std::vector<opmath_t> weights;

  explicit Readers(const Axis<opmath_t>& a) : lo(a.in), count(a.in), start(a.in) {
    for (int64_t i = 0; i < a.in; ++i) {
      lo[i] = a.first_at_least(i - 1);
      count[i] = a.first_at_least(i + 1) - lo[i];
      start[i] = static_cast<int64_t>(weights.size());
      for (int64_t o = lo[i]; o < lo[i] + count[i]; ++o) weights.push_back(a.weight(o, i));
    }
  }
};

// NCHW: row by row (the core's loop), in parallel.
template <typename scalar_t>
void forward_nchw(const Plan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  const Taps<opmath_t> ty(Axis<opmath_t>::make(p.mode, p.in_h, p.out_h));
  const Taps<opmath_t> tx(Axis<opmath_t>::make(p.mode, p.in_w, p.out_w));
  const scalar_t* src = p.input.const_data_ptr<scalar_t>();
  scalar_t* dst = p.output.data_ptr<scalar_t>();
  at::parallel_for(0, p.N * p.C * p.out_h, grain(p.out_w), [&](int64_t begin, int64_t end) {
    upsample::forward_nchw_rows(src, dst, ty, tx, p.in_h, p.in_w, p.out_h, p.out_w, begin, end);
  });
}

// channels_last: pixel by pixel (the core's loop), in parallel.
template <typename scalar_t>
void forward_nhwc(const Plan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  const Taps<opmath_t> ty(Axis<opmath_t>::make(p.mode, p.in_h, p.out_h));
  const Taps<opmath_t> tx(Axis<opmath_t>::make(p.mode, p.in_w, p.out_w));
  const scalar_t* src = p.input.const_data_ptr<scalar_t>();
  scalar_t* dst = p.output.data_ptr<scalar_t>();
  at::parallel_for(0, p.N * p.out_h * p.out_w, grain(p.C), [&](int64_t begin, int64_t end) {
    upsample::forward_nhwc_pixels(src, dst, ty, tx, p.C, p.in_h, p.in_w, p.out_h, p.out_w, begin, end);
  });
}

// The backward gathers: each input row sums the output rows that read it
// (a vectorisable loop per row), then each input pixel sums its readers along
// x. A fixed order, no atomics and no shared accumulators: bit-identical run
// to run whatever the thread count.
template <typename scalar_t>
void backward_nchw(const Plan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  const Readers<opmath_t> ry(Axis<opmath_t>::make(p.mode, p.in_h, p.out_h));
  const Readers<opmath_t> rx(Axis<opmath_t>::make(p.mode, p.in_w, p.out_w));
  const scalar_t* grad = p.input.const_data_ptr<scalar_t>();
  scalar_t* dst = p.output.data_ptr<scalar_t>();
  const int64_t IH = p.in_h, IW = p.in_w, OH = p.out_h, OW = p.out_w;
  at::parallel_for(0, p.N * p.C * IH, grain(OW * 2), [&](int64_t begin, int64_t end) {
    std::vector<opmath_t> t(OW);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t plane = r / IH, iy = r % IH;
      std::fill(t.begin(), t.end(), opmath_t(0));
      for (int64_t k = 0; k < ry.count[iy]; ++k) {
        const int64_t oy = ry.lo[iy] + k;
        const opmath_t wy = ry.weights[ry.start[iy] + k];
        const scalar_t* line = grad + (plane * OH + oy) * OW;
        for (int64_t ox = 0; ox < OW; ++ox) t[ox] += wy * static_cast<opmath_t>(line[ox]);
      }
      scalar_t* out = dst + r * IW;
      for (int64_t ix = 0; ix < IW; ++ix) {
        opmath_t acc = 0;
        const opmath_t* w = rx.weights.data() + rx.start[ix];
        const opmath_t* col = t.data() + rx.lo[ix];
        for (int64_t k = 0; k < rx.count[ix]; ++k) acc += w[k] * col[k];
        out[ix] = static_cast<scalar_t>(acc);
      }
    }
  });
}

template <typename scalar_t>
void backward_nhwc(const Plan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  const Readers<opmath_t> ry(Axis<opmath_t>::make(p.mode, p.in_h, p.out_h));
  const Readers<opmath_t> rx(Axis<opmath_t>::make(p.mode, p.in_w, p.out_w));
  const scalar_t* grad = p.input.const_data_ptr<scalar_t>();
  scalar_t* dst = p.output.data_ptr<scalar_t>();
  const int64_t C = p.C, IH = p.in_h, IW = p.in_w, OH = p.out_h, OW = p.out_w;
  at::parallel_for(0, p.N * IH * IW, grain(C * 4), [&](int64_t begin, int64_t end) {
    std::vector<opmath_t> acc(C);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / (IH * IW), iy = r / IW % IH, ix = r % IW;
      std::fill(acc.begin(), acc.end(), opmath_t(0));
      for (int64_t a = 0; a < ry.count[iy]; ++a) {
        const int64_t oy = ry.lo[iy] + a;
        const opmath_t wy = ry.weights[ry.start[iy] + a];
        for (int64_t b = 0; b < rx.count[ix]; ++b) {
          const int64_t ox = rx.lo[ix] + b;
          const opmath_t w = wy * rx.weights[rx.start[ix] + b];
          const scalar_t* g = grad + ((n * OH + oy) * OW + ox) * C;
          for (int64_t ch = 0; ch < C; ++ch) acc[ch] += w * static_cast<opmath_t>(g[ch]);
        }
      }
      scalar_t* out = dst + r * C;
      for (int64_t ch = 0; ch < C; ++ch) out[ch] = static_cast<scalar_t>(acc[ch]);
    }
  });
}

} // namespace

at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode) {
  const auto plan = upsample::plan_forward(input, output_size, mode);
  if (plan.output.numel() == 0) return plan.output;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "upsample_bilinear2d_cpu", [&] {
    plan.channels_last ? forward_nhwc<scalar_t>(plan) : forward_nchw<scalar_t>(plan);
  });
  return plan.output;
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                        c10::string_view mode) {
  const auto plan = upsample::plan_backward(grad_out, input_size, mode);
  if (plan.output.numel() == 0) return plan.output;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(),
                                  "upsample_bilinear2d_backward_cpu", [&] {
    plan.channels_last ? backward_nhwc<scalar_t>(plan) : backward_nchw<scalar_t>(plan);
  });
  return plan.output;
}

} // namespace customops::cpu::CPU_CAPABILITY
