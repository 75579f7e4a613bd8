// depthwise_conv2d on CPU: direct kernels over one (image, input channel) plane
// per task. Each task copies its plane once into a zero-padded buffer in
// opmath, so the inner loops need no bounds checks and, with unit stride along
// rows, run on whole vectors (at::vec): the forward keeps a run of outputs in
// registers across all taps, the input gradient scatters rows with axpys into
// a padded buffer, the weight gradient takes dot products of rows. Every sum
// has a fixed order: results do not depend on the thread count.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/conv2d.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
using Vec = at::vec::Vectorized<T>;

// The padded extent that the windows read: rows (out_h-1)*sh + (kh-1)*dh + 1,
// likewise columns. Rows are `stride` apart, kMaxRunVectors vectors longer and
// zero-filled, so that the last partial run of outputs can still load whole
// vectors (partial loads go through memory and stall on store forwarding).
struct Padded {
  int64_t rows, cols, stride;
};

template <typename opmath_t>
Padded padded_extent(const conv::DepthwisePlan& p) {
  const auto& w = p.w;
  const int64_t cols = (p.s.out_w - 1) * w.sw + (w.kw - 1) * w.dw + 1;
  return {(p.s.out_h - 1) * w.sh + (w.kh - 1) * w.dh + 1, cols, cols + 8 * Vec<opmath_t>::size()};
}

// buf[y][x] = plane[y - ph][x - pw], zero outside the plane.
template <typename scalar_t, typename opmath_t>
void pad_plane(const scalar_t* plane, int64_t H, int64_t W, const fold::Window& w, const Padded& e, opmath_t* buf) {
  // Columns [begin, end) of a padded row come from the plane's row.
  const int64_t begin = std::min(w.pw, e.cols), end = std::min(w.pw + W, e.cols);
  for (int64_t y = 0; y < e.rows; ++y) {
    opmath_t* row = buf + y * e.stride;
    const int64_t iy = y - w.ph;
    if (iy < 0 || iy >= H) {
      std::fill(row, row + e.stride, opmath_t(0));
      continue;
    }
    std::fill(row, row + begin, opmath_t(0));
    std::copy(plane + iy * W, plane + iy * W + (end - begin), row + begin);  // converts half and bfloat16
    std::fill(row + end, row + e.stride, opmath_t(0));
  }
}

// NV vectors of outputs of one row, starting at ox, in registers across all
// taps: NV independent multiply-add chains hide the FMA latency. Reads up to
// NV vectors past ox, within the row's slack.
template <int NV, typename scalar_t, typename opmath_t>
void forward_run(const opmath_t* top, const Padded& e, const opmath_t* taps, opmath_t bias, const fold::Window& w,
                 int64_t ox, int64_t count, scalar_t* out) {
  constexpr int64_t V = Vec<opmath_t>::size();
  Vec<opmath_t> a[NV];
  for (int v = 0; v < NV; ++v) a[v] = Vec<opmath_t>(bias);
  for (int64_t i = 0; i < w.kh; ++i) {
    const opmath_t* row = top + i * w.dh * e.stride + ox;
    for (int64_t j = 0; j < w.kw; ++j) {
      const Vec<opmath_t> t(taps[i * w.kw + j]);
      const opmath_t* s = row + j * w.dw;
      for (int v = 0; v < NV; ++v) a[v] = at::vec::fmadd(t, Vec<opmath_t>::loadu(s + v * V), a[v]);
    }
  }
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    for (int v = 0; v < NV; ++v) {
      const int64_t left = count - v * V;
      if (left >= V) {
        a[v].store(out + ox + v * V);
      } else if (left > 0) {
        a[v].store(out + ox + v * V, left);
      }
    }
  } else {
    opmath_t run[NV * V];
    for (int v = 0; v < NV; ++v) a[v].store(run + v * V);
    for (int64_t k = 0; k < count; ++k) out[ox + k] = static_cast<scalar_t>(run[k]);
  }
}

constexpr int kMaxRunVectors = 8;

// One output row of one channel from the padded input plane.
template <typename scalar_t, typename opmath_t>
void forward_row(const opmath_t* padded, const Padded& e, const opmath_t* taps, opmath_t bias,
                 const fold::Window& w, int64_t oy, int64_t ow, scalar_t* out) {
  const opmath_t* top = padded + oy * w.sh * e.stride;
  if (w.sw == 1) {
    constexpr int64_t V = Vec<opmath_t>::size();
    for (int64_t ox = 0; ox < ow;) {
      // The narrowest run that covers what is left, up to kMaxRunVectors.
      const int64_t vectors = std::min<int64_t>((ow - ox + V - 1) / V, kMaxRunVectors);
      const int64_t count = std::min(vectors * V, ow - ox);
      if (vectors > 4) {
        forward_run<8>(top, e, taps, bias, w, ox, count, out);
      } else if (vectors > 2) {
        forward_run<4>(top, e, taps, bias, w, ox, count, out);
      } else if (vectors == 2) {
        forward_run<2>(top, e, taps, bias, w, ox, count, out);
      } else {
        forward_run<1>(top, e, taps, bias, w, ox, count, out);
      }
      ox += count;
    }
    return;
  }
  for (int64_t ox = 0; ox < ow; ++ox) {
    opmath_t acc = bias;
    for (int64_t i = 0; i < w.kh; ++i) {
      const opmath_t* row = top + i * w.dh * e.stride + ox * w.sw;
      for (int64_t j = 0; j < w.kw; ++j) acc += taps[i * w.kw + j] * row[j * w.dw];
    }
    out[ox] = static_cast<scalar_t>(acc);
  }
}

// The taps of channel o, in opmath.
template <typename opmath_t, typename scalar_t>
void taps_of(const scalar_t* weight, int64_t o, int64_t n_taps, std::vector<opmath_t>& taps) {
  taps.assign(weight + o * n_taps, weight + (o + 1) * n_taps);
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

// sum over x < n of g[x] * v[x * stride].
template <typename opmath_t>
opmath_t dot(const opmath_t* g, const opmath_t* v, int64_t stride, int64_t n) {
  opmath_t sum = 0;
  int64_t x = 0;
  if (stride == 1) {
    constexpr int64_t V = Vec<opmath_t>::size();
    Vec<opmath_t> acc(0);
    for (; x + V <= n; x += V) acc = at::vec::fmadd(Vec<opmath_t>::loadu(g + x), Vec<opmath_t>::loadu(v + x), acc);
    opmath_t lanes[V];
    acc.store(lanes);
    for (int64_t k = 0; k < V; ++k) sum += lanes[k];
  }
  for (; x < n; ++x) sum += g[x] * v[x * stride];
  return sum;
}

} // namespace

at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  auto p = conv::depthwise_plan(input, weight, bias, stride, padding, dilation);
  const auto& s = p.s;
  const auto& w = p.w;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto e = padded_extent<opmath_t>(p);
    const scalar_t* x = p.x.const_data_ptr<scalar_t>();
    const scalar_t* wt = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* b = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* out = p.out.data_ptr<scalar_t>();
    at::parallel_for(0, s.N * s.C, 1, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> padded(e.rows * e.stride), taps;
      for (int64_t nc = begin; nc < end; ++nc) {
        pad_plane(x + nc * s.H * s.W, s.H, s.W, w, e, padded.data());
        const int64_t n = nc / s.C, c = nc % s.C;
        for (int64_t t = 0; t < p.m; ++t) {
          const int64_t o = c * p.m + t;
          taps_of(wt, o, w.kh * w.kw, taps);
          const opmath_t bias_o = b != nullptr ? static_cast<opmath_t>(b[o]) : opmath_t(0);
          scalar_t* plane = out + (n * s.O + o) * s.out_h * s.out_w;
          for (int64_t oy = 0; oy < s.out_h; ++oy) {
            forward_row(padded.data(), e, taps.data(), bias_o, w, oy, s.out_w, plane + oy * s.out_w);
          }
        }
      }
    });
  });
  return conv::unbatch(p.out, s);
}

conv::Grads depthwise_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                      std::array<bool, 3> output_mask) {
  const auto bp = conv::depthwise_backward_plan(grad_out, input, weight, stride, padding, dilation);
  const auto& p = bp.p;
  const auto& s = p.s;
  const auto& w = p.w;
  const int64_t n_taps = w.kh * w.kw;
  at::Tensor grad_input, grad_weight, grad_bias;
  const auto opmath = at::toOpMathType(p.x.scalar_type());
  if (output_mask[0]) grad_input = at::empty_like(p.x);
  // Per-image sums, then one reduction over the batch.
  at::Tensor partial = output_mask[1] ? at::empty({s.N, s.O, n_taps}, p.x.options().dtype(opmath)) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_backward_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto e = padded_extent<opmath_t>(p);
    const scalar_t* x = p.x.const_data_ptr<scalar_t>();
    const scalar_t* g = bp.gout.const_data_ptr<scalar_t>();
    const scalar_t* wt = p.weight.const_data_ptr<scalar_t>();
    const int64_t L = s.out_h * s.out_w;
    at::parallel_for(0, s.N * s.C, 1, [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> padded(e.rows * e.stride), gplane(L), gpad(output_mask[0] ? e.rows * e.stride : 0), taps;
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t n = nc / s.C, c = nc % s.C;
        if (output_mask[1]) pad_plane(x + nc * s.H * s.W, s.H, s.W, w, e, padded.data());
        std::fill(gpad.begin(), gpad.end(), opmath_t(0));
        for (int64_t t = 0; t < p.m; ++t) {
          const int64_t o = c * p.m + t;
          const scalar_t* go = g + (n * s.O + o) * L;
          std::copy(go, go + L, gplane.begin());
          if (output_mask[0]) {
            taps_of(wt, o, n_taps, taps);
            for (int64_t oy = 0; oy < s.out_h; ++oy) {
              for (int64_t i = 0; i < w.kh; ++i) {
                opmath_t* row = gpad.data() + (oy * w.sh + i * w.dh) * e.stride;
                for (int64_t j = 0; j < w.kw; ++j) {
                  axpy(row + j * w.dw, w.sw, gplane.data() + oy * s.out_w, taps[i * w.kw + j], s.out_w);
                }
              }
            }
          }
          if (output_mask[1]) {
            opmath_t* dst = partial.data_ptr<opmath_t>() + (n * s.O + o) * n_taps;
            for (int64_t i = 0; i < w.kh; ++i) {
              for (int64_t j = 0; j < w.kw; ++j) {
                opmath_t sum = 0;
                for (int64_t oy = 0; oy < s.out_h; ++oy) {
                  const opmath_t* row = padded.data() + (oy * w.sh + i * w.dh) * e.stride + j * w.dw;
                  sum += dot(gplane.data() + oy * s.out_w, row, w.sw, s.out_w);
                }
                dst[i * w.kw + j] = sum;
              }
            }
          }
        }
        if (output_mask[0]) {
          // Pixels past the padded extent are read by no window: zero gradient.
          scalar_t* gi = grad_input.data_ptr<scalar_t>() + nc * s.H * s.W;
          for (int64_t y = 0; y < s.H; ++y) {
            for (int64_t xx = 0; xx < s.W; ++xx) {
              const int64_t py = y + w.ph, px = xx + w.pw;
              gi[y * s.W + xx] = (py < e.rows && px < e.cols)
                                     ? static_cast<scalar_t>(gpad[py * e.stride + px])
                                     : scalar_t(0);
            }
          }
        }
      }
    });
  });
  if (output_mask[1]) grad_weight = partial.sum(0).to(p.x.scalar_type()).view(weight.sizes());
  if (output_mask[2]) grad_bias = bp.gout.sum({0, 2, 3});
  return {output_mask[0] ? conv::unbatch(grad_input, s) : grad_input, grad_weight, grad_bias};
}

} // namespace customops::cpu::CPU_CAPABILITY
