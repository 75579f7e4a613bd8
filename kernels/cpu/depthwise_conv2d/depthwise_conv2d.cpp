// depthwise_conv2d on CPU for NCHW tensors (channels_last ones run natively in
// nhwc_gather.h and nhwc_wgrad.cpp): direct kernels over one (image, input channel)
// plane per task. (The forward with channel multiplier 1 and enough channels runs
// blocked over channels instead: blocked.cpp.) Each task
// copies its plane once into a zero-padded buffer in opmath, so the inner loops
// need no bounds checks and, with unit stride along rows, run on whole vectors
// (at::vec).
//
// Forward and input gradient are one correlation kernel: at unit stride the
// input gradient is the correlation of the zero-padded output gradient with the
// flipped taps, a gather with no read-modify-write of memory. The kernel keeps
// a block of outputs (several rows by a few vectors) in registers across all
// taps, and each loaded input vector feeds every row of the block that reads
// it, so it is bound by multiply-adds rather than loads. The weight gradient
// keeps one vector accumulator per tap across the whole plane. Every sum has a
// fixed order: results do not depend on the thread count.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cpu/common/parallel.h"
#include "kernels/cpu/depthwise_conv2d/blocked.h"
#include "kernels/cpu/depthwise_conv2d/nhwc.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
using Vec = at::vec::Vectorized<T>;

constexpr int kMaxRunVectors = 8;

// The padded extent that a correlation producing out_h x out_w outputs reads:
// rows (out_h-1)*sh + (kh-1)*dh + 1, likewise columns. Rows are `stride` apart,
// kMaxRunVectors / 2 vectors longer and zero-filled, so that the last partial
// run of outputs (more than half of its NV <= kMaxRunVectors vectors are real)
// can still load whole vectors (partial loads go through memory and stall on
// store forwarding).
struct Padded {
  int64_t rows, cols, stride;
};

// Fails (naming `op`) where the extent or its element count, rows * stride,
// overflows int64 (huge padding or dilation): a wrapped count allocated a small
// buffer that pad_plane wrote past. Every buffer offset below is then in range.
template <typename opmath_t>
Padded padded_extent(const char* op, int64_t out_h, int64_t out_w, const fold::Window& w) {
  Padded e{};
  int64_t count = 0;
  const bool fits = fold::reach(out_h, w.kh, w.dh, w.sh, &e.rows) && fold::reach(out_w, w.kw, w.dw, w.sw, &e.cols) &&
                    !c10::add_overflows(e.cols, int64_t{kMaxRunVectors / 2 * Vec<opmath_t>::size()}, &e.stride) &&
                    !c10::mul_overflows(e.rows, e.stride, &count);
  TORCH_CHECK(fits, "customops::", op, ": padding and dilation too large: the zero-padded plane that the kernel "
              "stages overflows int64");
  return e;
}

// buf[y][x] = plane[y - top][x - left], zero outside the plane. top and left
// may be negative (the plane is cropped).
template <typename scalar_t, typename opmath_t>
void pad_plane(const scalar_t* plane, int64_t H, int64_t W, int64_t top, int64_t left, const Padded& e,
               opmath_t* buf) {
  // Columns [begin, end) of a padded row come from the plane's row.
  const int64_t begin = std::clamp<int64_t>(left, 0, e.cols);
  const int64_t end = std::clamp<int64_t>(left + W, begin, e.cols);
  for (int64_t y = 0; y < e.rows; ++y) {
    opmath_t* row = buf + y * e.stride;
    const int64_t iy = y - top;
    if (iy < 0 || iy >= H) {
      std::fill(row, row + e.stride, opmath_t(0));
      continue;
    }
    std::fill(row, row + begin, opmath_t(0));
    // A padding far past the plane leaves no columns to copy, and its offset must not move a pointer.
    if (end > begin) {
      const scalar_t* src = plane + iy * W + (begin - left);
      std::copy(src, src + (end - begin), row + begin);  // converts half and bfloat16
    }
    std::fill(row + end, row + e.stride, opmath_t(0));
  }
}

// acc[q][v] += taps[r - q][j] * row[j * dw + v * V] for block rows q in
// [Q0, Q1] and every tap column j: padded row r, loaded once per tap column,
// feeds each block row that reads it.
template <int Q0, int Q1, int R, int NV, typename opmath_t>
C10_ALWAYS_INLINE void row_taps(const opmath_t* row, const opmath_t* taps, int64_t r, const fold::Window& w,
                                Vec<opmath_t> (&acc)[R][NV]) {
  constexpr int64_t V = Vec<opmath_t>::size();
  for (int64_t j = 0; j < w.kw; ++j) {
    Vec<opmath_t> x[NV];
    for (int v = 0; v < NV; ++v) x[v] = Vec<opmath_t>::loadu(row + j * w.dw + v * V);
    for (int q = Q0; q <= Q1; ++q) {
      const Vec<opmath_t> t(taps[(r - q) * w.kw + j]);
      for (int v = 0; v < NV; ++v) acc[q][v] = at::vec::fmadd(t, x[v], acc[q][v]);
    }
  }
}

// Rows S..R-2 at the top of a block: row r feeds block rows 0..r.
template <int S, int R, int NV, typename opmath_t>
C10_ALWAYS_INLINE void top_rows(const opmath_t* top, int64_t pitch, const opmath_t* taps, const fold::Window& w,
                                Vec<opmath_t> (&acc)[R][NV]) {
  if constexpr (S <= R - 2) {
    row_taps<0, S>(top + S * pitch, taps, S, w, acc);
    top_rows<S + 1>(top, pitch, taps, w, acc);
  }
}

// Rows kh-1+S.. at the bottom of a block: row kh-1+S feeds block rows S..R-1.
template <int S, int R, int NV, typename opmath_t>
C10_ALWAYS_INLINE void bottom_rows(const opmath_t* top, int64_t pitch, const opmath_t* taps, const fold::Window& w,
                                   Vec<opmath_t> (&acc)[R][NV]) {
  if constexpr (S <= R - 1) {
    const int64_t r = w.kh - 1 + S;
    row_taps<S, R - 1>(top + r * pitch, taps, r, w, acc);
    bottom_rows<S + 1>(top, pitch, taps, w, acc);
  }
}

// acc[q][v] += sum over taps (i, j) of taps[i][j] * top[(q + i) * pitch + j * dw + v * V]:
// R block rows whose tap rows are one `pitch` apart, NV vectors each. Needs
// kh >= R - 1. Which block rows a padded row feeds is known at compile time
// (a run-time test would keep the accumulators out of registers).
template <int R, int NV, typename opmath_t>
C10_ALWAYS_INLINE void correlate_block(const opmath_t* top, int64_t pitch, const opmath_t* taps,
                                       const fold::Window& w, Vec<opmath_t> (&acc)[R][NV]) {
  top_rows<0>(top, pitch, taps, w, acc);
  for (int64_t r = R - 1; r < w.kh; ++r) row_taps<0, R - 1>(top + r * pitch, taps, r, w, acc);
  bottom_rows<1>(top, pitch, taps, w, acc);
}

// Where a correlation writes: out_h x out_w outputs of type out_t, each
// starting from `bias` or, when `init` is set, from the opmath value at the
// same place in `init` (which may be `out` itself).
template <typename opmath_t, typename out_t>
struct Sink {
  out_t* out;
  const opmath_t* init;
  opmath_t bias;
  int64_t out_h, out_w;
};

// The R x NV block of outputs at rows oy + q * ostep, columns ox.., of which
// `count` columns are real.
template <int R, int NV, typename opmath_t, typename out_t>
void block(const opmath_t* top, int64_t pitch, const opmath_t* taps, const fold::Window& w,
           const Sink<opmath_t, out_t>& s, int64_t oy, int64_t ostep, int64_t ox, int64_t count) {
  constexpr int64_t V = Vec<opmath_t>::size();
  Vec<opmath_t> acc[R][NV];
  for (int q = 0; q < R; ++q) {
    const int64_t at = (oy + q * ostep) * s.out_w + ox;
    for (int v = 0; v < NV; ++v) {
      const int64_t left = count - v * V;
      if (s.init == nullptr || left <= 0) {
        acc[q][v] = Vec<opmath_t>(s.bias);
      } else {
        acc[q][v] = left >= V ? Vec<opmath_t>::loadu(s.init + at + v * V)
                              : Vec<opmath_t>::loadu(s.init + at + v * V, left);
      }
    }
  }
  correlate_block<R, NV>(top + ox, pitch, taps, w, acc);
  for (int q = 0; q < R; ++q) {
    out_t* dst = s.out + (oy + q * ostep) * s.out_w + ox;
    if constexpr (std::is_same_v<out_t, opmath_t>) {
      for (int v = 0; v < NV; ++v) {
        const int64_t left = count - v * V;
        if (left >= V) {
          acc[q][v].store(dst + v * V);
        } else if (left > 0) {
          acc[q][v].store(dst + v * V, left);
        }
      }
    } else {
      opmath_t run[NV * V];
      for (int v = 0; v < NV; ++v) acc[q][v].store(run + v * V);
      at::vec::convert(run, dst, count);  // vectorised a half-type vector (2V lanes) at a time
    }
  }
}

// The outputs of columns [ox, ox + count), count <= NV vectors, as one block
// of the narrowest power-of-two width that holds them.
template <int R, int NV, typename opmath_t, typename out_t>
void block_tail(const opmath_t* top, int64_t pitch, const opmath_t* taps, const fold::Window& w,
                const Sink<opmath_t, out_t>& s, int64_t oy, int64_t ostep, int64_t ox, int64_t count) {
  constexpr int64_t V = Vec<opmath_t>::size();
  if constexpr (NV > 1) {
    if (count <= NV / 2 * V) {
      block_tail<R, NV / 2>(top, pitch, taps, w, s, oy, ostep, ox, count);
      return;
    }
  }
  block<R, NV>(top, pitch, taps, w, s, oy, ostep, ox, count);
}

// R output rows (oy + q * ostep) across all columns, in runs of NV vectors.
template <int R, int NV, typename opmath_t, typename out_t>
void block_row(const opmath_t* top, int64_t pitch, const opmath_t* taps, const fold::Window& w,
               const Sink<opmath_t, out_t>& s, int64_t oy, int64_t ostep) {
  constexpr int64_t run = NV * Vec<opmath_t>::size();
  int64_t ox = 0;
  for (; ox + run <= s.out_w; ox += run) block<R, NV>(top, pitch, taps, w, s, oy, ostep, ox, run);
  if (ox < s.out_w) block_tail<R, NV>(top, pitch, taps, w, s, oy, ostep, ox, s.out_w - ox);
}

// s.out[oy][ox] = (bias or init) + sum over taps (i, j) of
//   taps[i][j] * padded[oy * sh + i * dh][ox * sw + j * dw].
template <typename opmath_t, typename out_t>
void correlate_plane(const opmath_t* padded, const Padded& e, const opmath_t* taps, const fold::Window& w,
                     const Sink<opmath_t, out_t>& s) {
  if (w.sw != 1) {
    for (int64_t oy = 0; oy < s.out_h; ++oy) {
      for (int64_t ox = 0; ox < s.out_w; ++ox) {
        const int64_t at = oy * s.out_w + ox;
        opmath_t acc = s.init != nullptr ? s.init[at] : s.bias;
        for (int64_t i = 0; i < w.kh; ++i) {
          const opmath_t* row = padded + (oy * w.sh + i * w.dh) * e.stride + ox * w.sw;
          for (int64_t j = 0; j < w.kw; ++j) acc += taps[i * w.kw + j] * row[j * w.dw];
        }
        s.out[at] = static_cast<out_t>(acc);
      }
    }
    return;
  }
  // One tap row. dh < e.rows wherever a block reads more than one padded row
  // (kh > 1, or output rows chained below), so it lies within the buffer;
  // elsewhere it is never used, and a huge dilation wrapped the product.
  const int64_t pitch = w.dh < e.rows ? w.dh * e.stride : 0;
  // Output rows dh / sh apart read padded rows one tap row (dh) apart, so a
  // block of them shares loads; the rows fall into dh / sh such chains. Chains
  // of one row (ostep >= out_h) share nothing and take the single-row path
  // below: a huge dilation made oy + ostep wrap negative, and the loops ran on
  // from there (heap corruption). The block bounds below are divided for the
  // same reason: ostep < out_h, and oy + R * ostep never overflows.
  int64_t ostep = w.dh % w.sh == 0 ? w.dh / w.sh : 0;
  if (ostep >= s.out_h) ostep = 0;
  if (ostep == 0) {
    for (int64_t oy = 0; oy < s.out_h; ++oy) {
      block_row<1, kMaxRunVectors>(padded + oy * w.sh * e.stride, pitch, taps, w, s, oy, 1);
    }
    return;
  }
  // Blocks of R rows need kh >= R - 1 (correlate_block); taller blocks share
  // more loads and keep more multiply-add chains in flight.
  for (int64_t first = 0; first < std::min(ostep, s.out_h); ++first) {
    int64_t oy = first;
    for (; w.kh >= 5 && ostep <= (s.out_h - 1 - oy) / 5; oy += 6 * ostep) {  // oy + 5 * ostep < out_h
      block_row<6, 2>(padded + oy * w.sh * e.stride, pitch, taps, w, s, oy, ostep);
    }
    for (; w.kh >= 3 && ostep <= (s.out_h - 1 - oy) / 3; oy += 4 * ostep) {  // oy + 3 * ostep < out_h
      block_row<4, 2>(padded + oy * w.sh * e.stride, pitch, taps, w, s, oy, ostep);
    }
    for (; ostep <= s.out_h - 1 - oy; oy += 2 * ostep) {  // oy + ostep < out_h
      block_row<2, 4>(padded + oy * w.sh * e.stride, pitch, taps, w, s, oy, ostep);
    }
    for (; oy < s.out_h; oy += ostep) {
      block_row<1, kMaxRunVectors>(padded + oy * w.sh * e.stride, pitch, taps, w, s, oy, ostep);
    }
  }
}

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

// The taps of channel o, in opmath; flipped (reversed) for the input gradient.
template <typename opmath_t, typename scalar_t>
void taps_of(const scalar_t* weight, int64_t o, int64_t n_taps, bool flipped, std::vector<opmath_t>& taps) {
  taps.assign(weight + o * n_taps, weight + (o + 1) * n_taps);
  if (flipped) std::reverse(taps.begin(), taps.end());
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
    scalar_t* out = p.out.data_ptr<scalar_t>();
    at::parallel_for(0, s.N * s.C, 1, [&](int64_t begin, int64_t end) {
      // From ATen's allocator, which raises its out-of-memory error where a plane padded by a huge padding
      // cannot be allocated (a std::vector's may hand back nothing under a sanitizer's allocator).
      const auto buffer = at::empty({e.rows * e.stride}, p.x.options().dtype(c10::CppTypeToScalarType<opmath_t>::value));
      opmath_t* const padded = buffer.template data_ptr<opmath_t>();
      std::vector<opmath_t> taps;
      for (int64_t nc = begin; nc < end; ++nc) {
        pad_plane(x + nc * s.H * s.W, s.H, s.W, w.ph, w.pw, e, padded);
        const int64_t n = nc / s.C, c = nc % s.C;
        for (int64_t t = 0; t < p.m; ++t) {
          const int64_t o = c * p.m + t;
          taps_of(wt, o, w.kh * w.kw, false, taps);
          const opmath_t bias_o = b != nullptr ? static_cast<opmath_t>(b[o]) : opmath_t(0);
          scalar_t* plane = out + (n * s.O + o) * s.out_h * s.out_w;
          correlate_plane(padded, e, taps.data(), w,
                          Sink<opmath_t, scalar_t>{plane, nullptr, bias_o, s.out_h, s.out_w});
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
