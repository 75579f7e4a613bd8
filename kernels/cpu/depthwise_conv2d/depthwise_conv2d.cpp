// depthwise_conv2d on CPU for NCHW tensors (channels_last ones run natively in
// nhwc_gather.h and nhwc_wgrad.cpp): direct kernels over one (image, input channel)
// plane per task. The forward is kernels/core/depthwise_conv2d_rows.h's (which
// ExecuTorch's runtime runs too), or, with channel multiplier 1 and enough
// channels, the channel-blocked one (blocked.cpp).
//
// The input gradient is the same correlation: at unit stride it is the
// correlation of the zero-padded output gradient with the flipped taps, a
// gather with no read-modify-write of memory. The weight gradient keeps one
// vector accumulator per tap across the whole plane. Every sum has a fixed
// order: results do not depend on the thread count.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/core/depthwise_conv2d_rows.h"
#include "kernels/cpu/common/parallel.h"
#include "kernels/cpu/depthwise_conv2d/blocked.h"
#include "kernels/cpu/depthwise_conv2d/nhwc.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
using Vec = at::vec::Vectorized<T>;

using depthwise_impl::correlate_plane;
using depthwise_impl::pad_plane;
using depthwise_impl::Padded;
using depthwise_impl::Sink;
using depthwise_impl::taps_of;

// The padded extent of depthwise_impl::padded_extent, or an error naming `op` where it overflows int64.
template <typename opmath_t>
Padded padded_extent(const char* op, int64_t out_h, int64_t out_w, const fold::Window& w) {
  Padded e{};
  TORCH_CHECK(depthwise_impl::padded_extent<opmath_t>(out_h, out_w, w, &e), "customops::", op,
              ": padding and dilation too large: the zero-padded plane that the kernel stages overflows int64");
  return e;
}

// A task's padded plane from ATen's allocator, which raises its out-of-memory error where a plane padded by a huge
// padding cannot be allocated (a std::vector's may hand back nothing under a sanitizer's allocator).
template <typename T>
struct AtenBuffer {
  at::Tensor storage;
  explicit AtenBuffer(int64_t count) : storage(at::empty({count}, at::dtype(c10::CppTypeToScalarType<T>::value))) {}
  T* data() { return storage.data_ptr<T>(); }
};

// dst[i * kw + j] = sum over outputs of g[oy][ox] * padded[oy * sh + i * dh][ox + j * dw]
// for tap row i and the J tap columns from j0, at unit column stride. g rows
// are `gstride` apart and zero-filled past out_w. One vector accumulator per
// tap for the whole plane; lanes are summed once at the end.
template <int J, typename opmath_t>
void weight_grad_taps(const opmath_t* padded, const Padded& e, const opmath_t* g, int64_t gstride,
                      const fold::Window& w, int64_t out_h, int64_t out_w, int64_t i, int64_t j0, opmath_t* dst) {
  constexpr int64_t V = Vec<opmath_t>::size();
  Vec<opmath_t> acc[J];
  for (int jj = 0; jj < J; ++jj) acc[jj] = Vec<opmath_t>(0);
  const int64_t full = out_w / V * V, rest = out_w - full;
  for (int64_t oy = 0; oy < out_h; ++oy) {
    const opmath_t* grow = g + oy * gstride;
    const opmath_t* xrow = padded + (oy * w.sh + i * w.dh) * e.stride + j0 * w.dw;
    for (int64_t ox = 0; ox < full; ox += V) {
      const auto gv = Vec<opmath_t>::loadu(grow + ox);
      for (int jj = 0; jj < J; ++jj) {
        acc[jj] = at::vec::fmadd(gv, Vec<opmath_t>::loadu(xrow + jj * w.dw + ox), acc[jj]);
      }
    }
    if (rest > 0) {
      // Lanes past out_w read real pixels: zero them, or an inf there would
      // turn 0 * inf into a NaN.
      const auto gv = Vec<opmath_t>::loadu(grow + full);
      for (int jj = 0; jj < J; ++jj) {
        const auto xv = Vec<opmath_t>::set(Vec<opmath_t>(0), Vec<opmath_t>::loadu(xrow + jj * w.dw + full), rest);
        acc[jj] = at::vec::fmadd(gv, xv, acc[jj]);
      }
    }
  }
  for (int jj = 0; jj < J; ++jj) {
    dst[i * w.kw + j0 + jj] = at::vec::vec_reduce_all([](auto a, auto b) { return a + b; }, acc[jj]);
  }
}

// dst[i * kw + j] = sum over outputs of g[oy][ox] * padded[oy * sh + i * dh][ox * sw + j * dw].
template <typename opmath_t>
void weight_grad_plane(const opmath_t* padded, const Padded& e, const opmath_t* g, int64_t gstride,
                       const fold::Window& w, int64_t out_h, int64_t out_w, opmath_t* dst) {
  if (w.sw != 1) {
    for (int64_t t = 0; t < w.kh * w.kw; ++t) {
      const int64_t i = t / w.kw, j = t % w.kw;
      opmath_t sum = 0;
      for (int64_t oy = 0; oy < out_h; ++oy) {
        const opmath_t* row = padded + (oy * w.sh + i * w.dh) * e.stride + j * w.dw;
        for (int64_t ox = 0; ox < out_w; ++ox) sum += g[oy * gstride + ox] * row[ox * w.sw];
      }
      dst[t] = sum;
    }
    return;
  }
  constexpr int64_t kTapsPerPass = 8;  // accumulators held in registers
  for (int64_t i = 0; i < w.kh; ++i) {
    for (int64_t j0 = 0; j0 < w.kw; j0 += kTapsPerPass) {
      const auto args = std::make_tuple(padded, e, g, gstride, w, out_h, out_w, i, j0, dst);
      switch (std::min(kTapsPerPass, w.kw - j0)) {
        case 1: std::apply(weight_grad_taps<1, opmath_t>, args); break;
        case 2: std::apply(weight_grad_taps<2, opmath_t>, args); break;
        case 3: std::apply(weight_grad_taps<3, opmath_t>, args); break;
        case 4: std::apply(weight_grad_taps<4, opmath_t>, args); break;
        case 5: std::apply(weight_grad_taps<5, opmath_t>, args); break;
        case 6: std::apply(weight_grad_taps<6, opmath_t>, args); break;
        case 7: std::apply(weight_grad_taps<7, opmath_t>, args); break;
        default: std::apply(weight_grad_taps<8, opmath_t>, args); break;
      }
    }
  }
}

// acc[x * stride] += a * src[x] for x < n.
template <typename opmath_t>
void axpy(opmath_t* acc, int64_t stride, const opmath_t* src, opmath_t a, int64_t n) {
  int64_t x = 0;
  if (stride == 1) {
    constexpr int64_t V = Vec<opmath_t>::size();
    const Vec<opmath_t> av(a);
    for (; x + V <= n; x += V) {
      at::vec::fmadd(av, Vec<opmath_t>::loadu(src + x), Vec<opmath_t>::loadu(acc + x)).store(acc + x);
    }
  }
  for (; x < n; ++x) acc[x * stride] += a * src[x];
}

// Input gradient of one input channel at stride > 1, where the gather form
// does not apply: each gradient row is scattered (axpy) into a padded buffer.
template <typename scalar_t, typename opmath_t>
void input_grad_scatter(const scalar_t* g, const scalar_t* wt, const conv::DepthwisePlan& p, const Padded& e,
                        int64_t c, std::vector<opmath_t>& gpad, std::vector<opmath_t>& gplane,
                        std::vector<opmath_t>& taps, scalar_t* gi) {
  const auto& s = p.s;
  const auto& w = p.w;
  const int64_t L = s.out_h * s.out_w;
  gpad.assign(e.rows * e.stride, opmath_t(0));
  for (int64_t t = 0; t < p.m; ++t) {
    const int64_t o = c * p.m + t;
    gplane.assign(g + o * L, g + (o + 1) * L);
    taps_of(wt, o, w.kh * w.kw, false, taps);
    for (int64_t oy = 0; oy < s.out_h; ++oy) {
      for (int64_t i = 0; i < w.kh; ++i) {
        opmath_t* row = gpad.data() + (oy * w.sh + i * w.dh) * e.stride;
        for (int64_t j = 0; j < w.kw; ++j) {
          axpy(row + j * w.dw, w.sw, gplane.data() + oy * s.out_w, taps[i * w.kw + j], s.out_w);
        }
      }
    }
  }
  // Pixels past the padded extent are read by no window: zero gradient.
  for (int64_t y = 0; y < s.H; ++y) {
    for (int64_t x = 0; x < s.W; ++x) {
      const int64_t py = y + w.ph, px = x + w.pw;
      gi[y * s.W + x] = (py < e.rows && px < e.cols) ? static_cast<scalar_t>(gpad[py * e.stride + px]) : scalar_t(0);
    }
  }
}

// Input gradient of one input channel at unit stride: the correlation of the
// output gradient, zero-padded by (k - 1) * d - p on each side (cropped where
// that is negative), with the flipped taps, summed over the channel's m
// outputs.
template <typename scalar_t, typename opmath_t>
void input_grad_gather(const scalar_t* g, const scalar_t* wt, const conv::DepthwisePlan& p, const Padded& ge,
                       int64_t c, std::vector<opmath_t>& gpad, std::vector<opmath_t>& sum,
                       std::vector<opmath_t>& taps, scalar_t* gi) {
  const auto& s = p.s;
  const auto& w = p.w;
  const int64_t L = s.out_h * s.out_w;
  const fold::Window unit{w.kh, w.kw, w.dh, w.dw, 0, 0, 1, 1};
  const int64_t top = (w.kh - 1) * w.dh - w.ph, left = (w.kw - 1) * w.dw - w.pw;
  if (p.m > 1) sum.resize(s.H * s.W);
  for (int64_t t = 0; t < p.m; ++t) {
    const int64_t o = c * p.m + t;
    pad_plane(g + o * L, s.out_h, s.out_w, top, left, ge, gpad.data());
    taps_of(wt, o, w.kh * w.kw, true, taps);
    const opmath_t* init = t > 0 ? sum.data() : nullptr;
    if (t + 1 < p.m) {
      correlate_plane(gpad.data(), ge, taps.data(), unit, Sink<opmath_t, opmath_t>{sum.data(), init, 0, s.H, s.W});
    } else {
      correlate_plane(gpad.data(), ge, taps.data(), unit, Sink<opmath_t, scalar_t>{gi, init, 0, s.H, s.W});
    }
  }
}

} // namespace

at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  auto p = conv::depthwise_plan(input, weight, bias, stride, padding, dilation);
  if (p.channels_last) {
    depthwise_forward_nhwc(p);
    return conv::unbatch(p.out, p.s);
  }
  const auto& s = p.s;
  const auto& w = p.w;
  if (depthwise_blocked_applies(p)) {
    depthwise_forward_blocked(p);
    return conv::unbatch(p.out, s);
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto e = padded_extent<opmath_t>("depthwise_conv2d", s.out_h, s.out_w, w);
    const scalar_t* x = p.x.const_data_ptr<scalar_t>();
    const scalar_t* wt = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* b = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    depthwise_impl::forward_rows<scalar_t, opmath_t, AtenBuffer<opmath_t>>(
        x, wt, b, p.out.data_ptr<scalar_t>(), depthwise_impl::Sizes{s.N, s.C, s.H, s.W, s.out_h, s.out_w}, p.m, w, e,
        kParallelFor);
  });
  return conv::unbatch(p.out, s);
}

conv::Grads depthwise_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                      std::array<bool, 3> output_mask) {
  const auto bp = conv::depthwise_backward_plan(grad_out, input, weight, stride, padding, dilation);
  if (bp.p.channels_last) {  // batched, NHWC in memory
    at::Tensor gi = output_mask[0] ? depthwise_input_grad_nhwc(bp) : at::Tensor();
    at::Tensor gw = output_mask[1] ? depthwise_weight_grad_nhwc(bp).view(weight.sizes()) : at::Tensor();
    at::Tensor gb = output_mask[2] ? bp.gout.sum({0, 2, 3}) : at::Tensor();
    return {gi, gw, gb};
  }
  const auto& p = bp.p;
  const auto& s = p.s;
  const auto& w = p.w;
  const int64_t n_taps = w.kh * w.kw;
  at::Tensor grad_input, grad_weight, grad_bias;
  const auto opmath = at::toOpMathType(p.x.scalar_type());
  if (output_mask[0]) grad_input = at::empty_like(p.x);
  // Per-image sums, then one reduction over the batch.
  at::Tensor partial = output_mask[1] ? at::empty({s.N, s.O, n_taps}, p.x.options().dtype(opmath)) : at::Tensor();
  const bool gather = w.sh == 1 && w.sw == 1;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_backward_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    constexpr int64_t V = Vec<opmath_t>::size();
    const auto xe = padded_extent<opmath_t>("depthwise_conv2d_backward", s.out_h, s.out_w, w);
    const auto ge = padded_extent<opmath_t>("depthwise_conv2d_backward", s.H, s.W,
                                            fold::Window{w.kh, w.kw, w.dh, w.dw, 0, 0, 1, 1});
    const int64_t gstride = (s.out_w + V - 1) / V * V;
    const scalar_t* x = p.x.const_data_ptr<scalar_t>();
    const scalar_t* g = bp.gout.const_data_ptr<scalar_t>();
    const scalar_t* wt = p.weight.const_data_ptr<scalar_t>();
    const int64_t L = s.out_h * s.out_w;
    at::parallel_for(0, s.N * s.C, 1, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> xpad(output_mask[1] ? xe.rows * xe.stride : 0), gpad, scratch, taps;
      std::vector<opmath_t> gplane(output_mask[1] ? s.out_h * gstride : 0, opmath_t(0));
      if (output_mask[0] && gather) gpad.resize(ge.rows * ge.stride);
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t n = nc / s.C, c = nc % s.C;
        const scalar_t* gn = g + n * s.O * L;
        if (output_mask[0]) {
          scalar_t* gi = grad_input.data_ptr<scalar_t>() + nc * s.H * s.W;
          if (gather) {
            input_grad_gather(gn, wt, p, ge, c, gpad, scratch, taps, gi);
          } else {
            input_grad_scatter(gn, wt, p, xe, c, gpad, scratch, taps, gi);
          }
        }
        if (!output_mask[1]) continue;
        pad_plane(x + nc * s.H * s.W, s.H, s.W, w.ph, w.pw, xe, xpad.data());
        for (int64_t t = 0; t < p.m; ++t) {
          const int64_t o = c * p.m + t;
          for (int64_t oy = 0; oy < s.out_h; ++oy) {
            const scalar_t* row = gn + (o * s.out_h + oy) * s.out_w;
            std::copy(row, row + s.out_w, gplane.begin() + oy * gstride);
          }
          opmath_t* dst = partial.data_ptr<opmath_t>() + (n * s.O + o) * n_taps;
          weight_grad_plane(xpad.data(), xe, gplane.data(), gstride, w, s.out_h, s.out_w, dst);
        }
      }
    });
  });
  if (output_mask[1]) grad_weight = partial.sum(0).to(p.x.scalar_type()).view(weight.sizes());
  if (output_mask[2]) grad_bias = bp.gout.sum({0, 2, 3});
  return {output_mask[0] ? conv::unbatch(grad_input, s) : grad_input, grad_weight, grad_bias};
}

} // namespace customops::cpu::CPU_CAPABILITY
