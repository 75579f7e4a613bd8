// depthwise_conv2d's row-vectorised CPU kernel for NCHW planes, on raw pointers: the forward of every call that the
// channel-blocked kernel (depthwise_conv2d.h) does not take (a channel multiplier, few channels, huge planes), in
// libtorch's CPU kernels (kernels/cpu/depthwise_conv2d/depthwise_conv2d.cpp, whose input gradient runs the same
// correlation) and ExecuTorch's (kernels/executorch/isa/depthwise_conv2d.cpp). Header-only at::vec, compiled once
// per instruction set by each runtime.
//
// Each task copies one (image, input channel) plane once into a zero-padded buffer in opmath, so the inner loops
// need no bounds checks and, with unit stride along rows, run on whole vectors. The kernel keeps a block of
// outputs (several rows by a few vectors) in registers across all taps, and each loaded input vector feeds every
// row of the block that reads it, so it is bound by multiply-adds rather than loads. Every sum has a fixed order:
// results do not depend on the thread count.
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/core/depthwise_conv2d.h"
#include "kernels/core/fold.h"

namespace customops::depthwise_impl {

// Internal linkage, as depthwise_conv2d.h: one copy per runtime and instruction set.
namespace {

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

// False where the extent or its element count, rows * stride, overflows int64 (huge padding or dilation): a
// wrapped count allocated a small buffer that pad_plane wrote past. Every buffer offset below is then in range.
template <typename opmath_t>
bool padded_extent(int64_t out_h, int64_t out_w, const fold::Window& w, Padded* e) {
  int64_t count = 0;
  return fold::reach(out_h, w.kh, w.dh, w.sh, &e->rows) && fold::reach(out_w, w.kw, w.dw, w.sw, &e->cols) &&
         !__builtin_add_overflow(e->cols, int64_t{kMaxRunVectors / 2 * Vec<opmath_t>::size()}, &e->stride) &&
         !__builtin_mul_overflow(e->rows, e->stride, &count);
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
      std::transform(src, src + (end - begin), row + begin, [](scalar_t v) { return static_cast<opmath_t>(v); });
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

// The taps of output channel o, in opmath; flipped (reversed) for the input gradient.
template <typename opmath_t, typename scalar_t>
void taps_of(const scalar_t* weight, int64_t o, int64_t n_taps, bool flipped, std::vector<opmath_t>& taps) {
  taps.resize(n_taps);
  std::transform(weight + o * n_taps, weight + (o + 1) * n_taps, taps.begin(),
                 [](scalar_t v) { return static_cast<opmath_t>(v); });
  if (flipped) std::reverse(taps.begin(), taps.end());
}

// out = depthwise_conv2d(x, weight, bias) for NCHW-contiguous x (s.N x s.C planes) and out (s.N x s.C * m planes,
// channel multiplier m), (s.C * m, kh * kw) weight, bias of s.C * m values or null; e from padded_extent.
// Buffer(count).data() is a task's padded plane (the runtime's allocation: libtorch's raises its out-of-memory
// error where a plane padded by a huge padding cannot be allocated); parallel_for as forward_blocked's.
template <typename scalar_t, typename opmath_t, typename Buffer, typename ParallelFor>
void forward_rows(const scalar_t* x, const scalar_t* wt, const scalar_t* b, scalar_t* out, const Sizes& s, int64_t m,
                  const fold::Window& w, const Padded& e, const ParallelFor& parallel_for) {
  const int64_t O = s.C * m, L = s.out_h * s.out_w;
  parallel_for(0, s.N * s.C, 1, [&](int64_t begin, int64_t end) {
    Buffer buffer(e.rows * e.stride);
    opmath_t* const padded = buffer.data();
    std::vector<opmath_t> taps;
    for (int64_t nc = begin; nc < end; ++nc) {
      pad_plane(x + nc * s.H * s.W, s.H, s.W, w.ph, w.pw, e, padded);
      const int64_t n = nc / s.C, c = nc % s.C;
      for (int64_t t = 0; t < m; ++t) {
        const int64_t o = c * m + t;
        taps_of(wt, o, w.kh * w.kw, false, taps);
        const opmath_t bias_o = b != nullptr ? static_cast<opmath_t>(b[o]) : opmath_t(0);
        correlate_plane(padded, e, taps.data(), w,
                        Sink<opmath_t, scalar_t>{out + (n * O + o) * L, nullptr, bias_o, s.out_h, s.out_w});
      }
    }
  });
}

}  // namespace
}  // namespace customops::depthwise_impl
