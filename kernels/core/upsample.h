// upsample_bilinear2d's coordinate maths (every backend's) and its CPU forward loops on raw pointers, shared by
// libtorch's kernels (kernels/cpu/upsample.cpp, kernels/cuda/upsample/) and ExecuTorch's
// (kernels/executorch/upsample.cpp): one formula, every runtime. kernels/upsample.h says what the modes compute.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/core/host_device.h"

namespace customops::upsample {

enum class Mode { HalfPixel, AlignCorners, Asymmetric };

// The schema's coordinate_mode string as a Mode; false for an unknown name (each runtime reports it its way).
inline bool mode_from(std::string_view name, Mode* mode) {
  if (name == "half_pixel") *mode = Mode::HalfPixel;
  else if (name == "align_corners") *mode = Mode::AlignCorners;
  else if (name == "asymmetric") *mode = Mode::Asymmetric;
  else return false;
  return true;
}

// One axis of the resize: in -> out positions. opmath_t is float for float16,
// bfloat16 and float32 (PyTorch computes these coordinates in float too) and
// double for float64.
template <typename opmath_t>
struct Axis {
  opmath_t scale, off;
  opmath_t inverse;  // 1 / scale (0 with scale), for first_at_least's estimate
  int64_t in, out;

  static Axis make(Mode mode, int64_t in, int64_t out) {
    Axis a{opmath_t(0), opmath_t(0), opmath_t(0), in, out};
    if (mode == Mode::AlignCorners) {
      a.scale = out > 1 ? static_cast<opmath_t>(in - 1) / static_cast<opmath_t>(out - 1) : opmath_t(0);
    } else {
      a.scale = static_cast<opmath_t>(in) / static_cast<opmath_t>(out);
      a.off = mode == Mode::HalfPixel ? opmath_t(0.5) : opmath_t(0);
    }
    a.inverse = a.scale != opmath_t(0) ? opmath_t(1) / a.scale : opmath_t(0);
    return a;
  }

  // The two input indices output o blends, and their weights.
  template <typename index_t>
  CUSTOMOPS_HOST_DEVICE void taps(index_t o, index_t& i0, index_t& i1, opmath_t& w0, opmath_t& w1) const {
    opmath_t src = scale * (static_cast<opmath_t>(o) + off) - off;
    src = src < opmath_t(0) ? opmath_t(0) : src;
    const index_t last = static_cast<index_t>(in - 1);
    i0 = static_cast<index_t>(src);
    i0 = i0 < last ? i0 : last;
    i1 = i0 < last ? i0 + 1 : last;
    opmath_t l = src - static_cast<opmath_t>(i0);
    l = l < opmath_t(0) ? opmath_t(0) : (l > opmath_t(1) ? opmath_t(1) : l);
    w1 = l;
    w0 = opmath_t(1) - l;
  }

  template <typename index_t>
  CUSTOMOPS_HOST_DEVICE index_t first_tap(index_t o) const {
    index_t i0, i1;
    opmath_t w0, w1;
    taps(o, i0, i1, w0, w1);
    return i0;
  }

  // The first output whose i0 is at least t (out if none). i0 never decreases
  // with o, so the outputs that read input i, those with i0 in {i-1, i}, are
  // [first_at_least(i-1), first_at_least(i+1)). The estimate inverts src; the
  // loops make the answer exact under the same rounding as taps().
  template <typename index_t>
  CUSTOMOPS_HOST_DEVICE index_t first_at_least(index_t t) const {
    const index_t n = static_cast<index_t>(out);
    if (t <= 0) return 0;
    if (scale == opmath_t(0)) return n;  // every output reads input 0
    opmath_t est = (static_cast<opmath_t>(t) + off) * inverse - off;
    index_t o = est <= opmath_t(0) ? index_t(0)
                                   : (est >= static_cast<opmath_t>(n) ? n : static_cast<index_t>(est));
    while (o > 0 && first_tap<index_t>(o - 1) >= t) --o;
    while (o < n && first_tap<index_t>(o) < t) ++o;
    return o;
  }

  // Weight of output o's taps on input i (both taps may be i at the last index).
  template <typename index_t>
  CUSTOMOPS_HOST_DEVICE opmath_t weight(index_t o, index_t i) const {
    index_t i0, i1;
    opmath_t w0, w1;
    taps(o, i0, i1, w0, w1);
    return (i0 == i ? w0 : opmath_t(0)) + (i1 == i ? w1 : opmath_t(0));
  }
};

// Internal linkage: the CPU kernels compile this once per instruction set (kernels/cpu/), and one shared
// symbol would let the linker keep any one of those copies for every caller.
namespace {

// Each output index's taps along one axis, computed once per call.
template <typename opmath_t>
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<opmath_t> w0, w1;

  explicit Taps(const Axis<opmath_t>& a) : i0(a.out), i1(a.out), w0(a.out), w1(a.out) {
    for (int64_t o = 0; o < a.out; ++o) a.taps(o, i0[o], i1[o], w0[o], w1[o]);
  }
};

// NCHW, output rows [begin, end) of the N*C*OH rows, row by row: each input row is interpolated along x once into
// a buffer and reused by every output row that reads it (two or more when upsampling), and the blend along y is a
// plain vectorisable loop. src (N, C, IH, IW) and dst (N, C, OH, OW), contiguous.
template <typename scalar_t, typename opmath_t>
void forward_nchw_rows(const scalar_t* src, scalar_t* dst, const Taps<opmath_t>& ty, const Taps<opmath_t>& tx,
                       int64_t IH, int64_t IW, int64_t OH, int64_t OW, int64_t begin, int64_t end) {
  std::vector<opmath_t> buf[2] = {std::vector<opmath_t>(OW), std::vector<opmath_t>(OW)};
  int64_t held[2] = {-1, -1};  // which input row (n*C + c)*IH + y each buffer holds
  auto row = [&](int64_t key, int64_t keep) -> const opmath_t* {
    for (int b = 0; b < 2; ++b) {
      if (held[b] == key) return buf[b].data();
    }
    const int b = held[0] == keep ? 1 : 0;
    held[b] = key;
    const scalar_t* line = src + key * IW;
    opmath_t* out = buf[b].data();
    for (int64_t ox = 0; ox < OW; ++ox) {
      out[ox] = tx.w0[ox] * static_cast<opmath_t>(line[tx.i0[ox]]) + tx.w1[ox] * static_cast<opmath_t>(line[tx.i1[ox]]);
    }
    return out;
  };
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / OH, oy = r % OH;
    const int64_t k0 = plane * IH + ty.i0[oy], k1 = plane * IH + ty.i1[oy];
    const opmath_t* r0 = row(k0, k1);
    const opmath_t* r1 = row(k1, k0);
    const opmath_t w0 = ty.w0[oy], w1 = ty.w1[oy];
    scalar_t* out = dst + r * OW;
    for (int64_t ox = 0; ox < OW; ++ox) out[ox] = static_cast<scalar_t>(w0 * r0[ox] + w1 * r1[ox]);
  }
}

// channels_last, output pixels [begin, end) of the N*OH*OW pixels: the four source pixels' channels are
// contiguous, so each output pixel is one vectorisable loop over C. src (N, IH, IW, C), dst (N, OH, OW, C).
template <typename scalar_t, typename opmath_t>
void forward_nhwc_pixels(const scalar_t* src, scalar_t* dst, const Taps<opmath_t>& ty, const Taps<opmath_t>& tx,
                         int64_t C, int64_t IH, int64_t IW, int64_t OH, int64_t OW, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / (OH * OW), oy = r / OW % OH, ox = r % OW;
    const scalar_t* image = src + n * IH * IW * C;
    const scalar_t* a = image + (ty.i0[oy] * IW + tx.i0[ox]) * C;
    const scalar_t* b = image + (ty.i0[oy] * IW + tx.i1[ox]) * C;
    const scalar_t* c = image + (ty.i1[oy] * IW + tx.i0[ox]) * C;
    const scalar_t* d = image + (ty.i1[oy] * IW + tx.i1[ox]) * C;
    const opmath_t wy0 = ty.w0[oy], wy1 = ty.w1[oy], wx0 = tx.w0[ox], wx1 = tx.w1[ox];
    scalar_t* out = dst + r * C;
    for (int64_t ch = 0; ch < C; ++ch) {
      const opmath_t top = wx0 * static_cast<opmath_t>(a[ch]) + wx1 * static_cast<opmath_t>(b[ch]);
      const opmath_t bottom = wx0 * static_cast<opmath_t>(c[ch]) + wx1 * static_cast<opmath_t>(d[ch]);
      out[ch] = static_cast<scalar_t>(wy0 * top + wy1 * bottom);
    }
  }
}

} // namespace
} // namespace customops::upsample
