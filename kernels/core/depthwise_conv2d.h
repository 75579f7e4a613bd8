// depthwise_conv2d's channel-blocked CPU forward on raw pointers, shared by libtorch's CPU kernels
// (kernels/cpu/depthwise_conv2d/blocked.cpp) and ExecuTorch's (kernels/executorch/depthwise_conv2d*.cpp): one
// kernel, every runtime. It uses at::vec, which is header-only: each runtime compiles it once per instruction set.
//
// A task takes one vector's worth of channels (V) of one image and transposes them into a zero-padded buffer laid
// out [row][column][channel], so that an output pixel of all V channels is one vector and the taps of one tap
// position are one vector. Every multiply-add then loads one vector-aligned input vector, at any image width,
// stride or dilation. The row-vectorised kernel of libtorch's CPU build leaves lanes idle on rows that are not a
// multiple of the vector width, loads across cache lines and is scalar at column stride > 1; on the benchmark's
// shapes this one takes 0.45-0.65 of its time.
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/core/fold.h"
#include "kernels/core/vec_store.h"

namespace customops::depthwise_impl {

// The sizes of a depthwise forward: input N x C x H x W, output planes of out_h x out_w.
struct Sizes {
  int64_t N, C, H, W, out_h, out_w;
};

// Internal linkage: each runtime compiles this once per instruction set, and one shared symbol would let the
// linker keep any one of those copies for every caller.
namespace {

template <typename T>
using Vec = at::vec::Vectorized<T>;
using cpu::CPU_CAPABILITY::store_lanes;

// dst[j * ld_dst + i] = src[i * ld_src + j] for i in [i0, i1), j in [j0, j1).
template <typename S, typename D>
void transpose_scalar(const S* src, int64_t ld_src, D* dst, int64_t ld_dst, int64_t i0, int64_t i1, int64_t j0,
                      int64_t j1) {
  for (int64_t j = j0; j < j1; ++j) {
    for (int64_t i = i0; i < i1; ++i) dst[j * ld_dst + i] = static_cast<D>(src[i * ld_src + j]);
  }
}

// dst[j * ld_dst + i] = src[i * ld_src + j] for i < M, j < N (float or double).
template <typename T>
void transpose(const T* src, int64_t ld_src, T* dst, int64_t ld_dst, int64_t M, int64_t N) {
  if constexpr (std::is_same_v<T, float>) {
    // ATen's square float tile transposes are vector code on AVX2 (8x8) and
    // AVX512 (16x16); scalar in the DEFAULT build.
    constexpr int K = Vec<float>::size();
    const int64_t M0 = M / K * K, N0 = N / K * K;
    for (int64_t i = 0; i < M0; i += K) {
      for (int64_t j = 0; j < N0; j += K) {
        at::vec::transpose_mxn<float, K, K>(src + i * ld_src + j, ld_src, dst + j * ld_dst + i, ld_dst);
      }
    }
    transpose_scalar(src, ld_src, dst, ld_dst, 0, M0, N0, N);
    transpose_scalar(src, ld_src, dst, ld_dst, M0, M, 0, N);
  } else {
    transpose_scalar(src, ld_src, dst, ld_dst, 0, M, 0, N);
  }
}

// The same from scalar_t rows into opmath: half types are widened a row at a
// time into `scratch` (M x N) with vector conversions, then transposed as
// float (a scalar transpose that converts each element took longer than the
// sums).
template <typename scalar_t, typename opmath_t>
void transpose_in(const scalar_t* src, int64_t ld_src, opmath_t* dst, int64_t ld_dst, int64_t M, int64_t N,
                  opmath_t* scratch) {
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    transpose(src, ld_src, dst, ld_dst, M, N);
  } else {
    for (int64_t i = 0; i < M; ++i) at::vec::convert(src + i * ld_src, scratch + i * N, N);
    transpose(scratch, N, dst, ld_dst, M, N);
  }
}

// And back: opmath to scalar_t rows, half types transposed as float into
// `scratch` (N x M) and narrowed a vector at a time.
template <typename opmath_t, typename scalar_t>
void transpose_out(const opmath_t* src, int64_t ld_src, scalar_t* dst, int64_t ld_dst, int64_t M, int64_t N,
                   opmath_t* scratch) {
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    transpose(src, ld_src, dst, ld_dst, M, N);
  } else {
    constexpr int64_t V = Vec<opmath_t>::size();
    transpose(src, ld_src, scratch, M, M, N);
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t i = 0; i < M; i += V) {
        store_lanes(Vec<opmath_t>::loadu(scratch + j * M + i), dst + j * ld_dst + i, M - i);
      }
    }
  }
}

// P output pixels of one row, V channels each, from the padded buffer `row0`
// (the first tap row of the first pixel); `pitch` is one tap row (dh padded
// rows), `step` one pixel (sw columns), `dcol` one tap column (dw columns).
template <int P, typename opmath_t>
C10_ALWAYS_INLINE void pixels(const opmath_t* row0, int64_t pitch, int64_t step, int64_t dcol, const opmath_t* tapv,
                              int64_t kh, int64_t kw, const opmath_t* biasv, opmath_t* tile) {
  Vec<opmath_t> acc[P];
  const auto b = Vec<opmath_t>::loadu(biasv);
  for (int px = 0; px < P; ++px) acc[px] = b;
  for (int64_t i = 0; i < kh; ++i) {
    const opmath_t* row = row0 + i * pitch;
    for (int64_t j = 0; j < kw; ++j) {
      const auto t = Vec<opmath_t>::loadu(tapv + (i * kw + j) * Vec<opmath_t>::size());
      const opmath_t* src = row + j * dcol;
      for (int px = 0; px < P; ++px) acc[px] = at::vec::fmadd(t, Vec<opmath_t>::loadu(src + px * step), acc[px]);
    }
  }
  for (int px = 0; px < P; ++px) acc[px].store(tile + px * Vec<opmath_t>::size());
}

// The task buffer's extent: the padded rows and columns that the windows of
// out_h rows of out_w rounded up to P pixels read.
struct Extent {
  int64_t rows, cols, out_wp;
};

// nullopt where the extent overflows int64: the columns of whole blocks reach
// (out_wp - 1) * sw, which wrapped for a huge stride (even one output column
// rounds up to P), and a wrapped extent could pass applies()'s budget.
inline std::optional<Extent> extent_of(const Sizes& s, const fold::Window& w, int64_t P) {
  const int64_t out_wp = (s.out_w + P - 1) / P * P;  // the last block computes whole
  Extent e{0, 0, out_wp};
  if (!fold::reach(s.out_h, w.kh, w.dh, w.sh, &e.rows) || !fold::reach(out_wp, w.kw, w.dw, w.sw, &e.cols)) {
    return std::nullopt;
  }
  return e;
}

// Pixels a block: at least 8 multiply-add chains in flight (two pipes of 4
// cycles' latency), and for float a square tile to transpose back.
template <typename opmath_t>
constexpr int kPixels = Vec<opmath_t>::size() >= 8 ? static_cast<int>(Vec<opmath_t>::size()) : 8;

// True where the blocked forward handles the call and pays: channel multiplier 1 (m), and enough channels to
// fill most lanes of each vector; its buffer within budget.
template <typename opmath_t>
bool blocked_applies(const Sizes& s, const fold::Window& w, int64_t m) {
  constexpr int64_t V = Vec<opmath_t>::size();
  const int64_t blocks = (s.C + V - 1) / V;
  if (m != 1 || 4 * s.C < 3 * blocks * V) return false;  // most lanes would idle
  // A task's buffer holds V padded planes; past 16 MiB (images of about 700x700
  // pixels) the row kernel, which holds one plane, is used instead.
  // Checked: a huge stride, padding or dilation wrapped the product below the budget.
  const auto e = extent_of(s, w, kPixels<opmath_t>);
  int64_t pixels = 0, bytes = 0;
  return e.has_value() && !__builtin_mul_overflow(e->rows, e->cols, &pixels) &&
         !__builtin_mul_overflow(pixels, V * int64_t(sizeof(opmath_t)), &bytes) && bytes <= (int64_t{16} << 20);
}

// out = depthwise_conv2d(x, weight, bias) for NCHW-contiguous x and out, (C, kh * kw) weight, bias of C values or
// null, where blocked_applies<opmath_t>. parallel_for(begin, end, grain, fn(begin, end)) is the runtime's.
template <typename scalar_t, typename opmath_t, typename ParallelFor>
void forward_blocked(const scalar_t* x, const scalar_t* wt, const scalar_t* b, scalar_t* out, const Sizes& s,
                     const fold::Window& w, const ParallelFor& parallel_for) {
  constexpr int64_t V = Vec<opmath_t>::size();
  constexpr int P = kPixels<opmath_t>;
  if (s.N == 0 || s.C == 0 || s.out_h == 0 || s.out_w == 0) return;
  const int64_t blocks = (s.C + V - 1) / V;
  // Input rows and columns past the extent are read by no window.
  const Extent extent = *extent_of(s, w, P);  // blocked_applies has checked it
  const int64_t rows = extent.rows, cols = extent.cols, out_wp = extent.out_wp;
  const int64_t top = std::min(w.ph, rows), in_rows = std::clamp<int64_t>(rows - w.ph, 0, s.H);
  const int64_t left = std::min(w.pw, cols), in_cols = std::clamp<int64_t>(cols - w.pw, 0, s.W);
  const int64_t HW = s.H * s.W, L = s.out_h * s.out_w, n_taps = w.kh * w.kw;
  // A tap row (column) apart: within the budgeted buffer, except along an axis
  // of one tap, where it is never used and a huge dilation wrapped the product.
  const int64_t pitch = w.kh > 1 ? w.dh * cols * V : 0, dcol = w.kw > 1 ? w.dw * V : 0;
  parallel_for(0, s.N * blocks, 1, [&](int64_t begin, int64_t end) {
    // buf is vector-aligned so that every input load is.
    // Half types convert through a scratch of V rows of the wider of a staged row and a tile.
    const int64_t scratch_elems = std::is_same_v<scalar_t, opmath_t> ? 0 : V * std::max<int64_t>(cols, P);
    std::vector<opmath_t> storage(rows * cols * V + (n_taps + 1 + P) * V + V + scratch_elems);
    const auto misalign = reinterpret_cast<uintptr_t>(storage.data()) % (V * sizeof(opmath_t));
    opmath_t* buf = storage.data() + (misalign == 0 ? 0 : (V * sizeof(opmath_t) - misalign) / sizeof(opmath_t));
    opmath_t* tapv = buf + rows * cols * V;
    opmath_t* biasv = tapv + n_taps * V;
    opmath_t* tile = biasv + V;
    opmath_t* scratch = tile + P * V;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / blocks, c0 = task % blocks * V, vc = std::min(V, s.C - c0);
      // Lanes past the last channel compute zeros that are never stored.
      for (int64_t t = 0; t < n_taps; ++t) {
        for (int64_t lane = 0; lane < V; ++lane) {
          tapv[t * V + lane] = lane < vc ? static_cast<opmath_t>(wt[(c0 + lane) * n_taps + t]) : opmath_t(0);
        }
      }
      for (int64_t lane = 0; lane < V; ++lane) {
        biasv[lane] = b != nullptr && lane < vc ? static_cast<opmath_t>(b[c0 + lane]) : opmath_t(0);
      }
      std::fill(buf, buf + top * cols * V, opmath_t(0));
      std::fill(buf + (top + in_rows) * cols * V, buf + rows * cols * V, opmath_t(0));
      const scalar_t* plane = x + (n * s.C + c0) * HW;
      for (int64_t y = 0; y < in_rows; ++y) {
        opmath_t* row = buf + (top + y) * cols * V;
        if (vc < V) {
          std::fill(row, row + cols * V, opmath_t(0));
        } else {
          std::fill(row, row + left * V, opmath_t(0));
          std::fill(row + (left + in_cols) * V, row + cols * V, opmath_t(0));
        }
        transpose_in(plane + y * s.W, HW, row + left * V, V, vc, in_cols, scratch);
      }
      scalar_t* dst = out + (n * s.C + c0) * L;
      for (int64_t oy = 0; oy < s.out_h; ++oy) {
        for (int64_t ox = 0; ox < out_wp; ox += P) {
          pixels<P>(buf + (oy * w.sh * cols + ox * w.sw) * V, pitch, w.sw * V, dcol, tapv, w.kh, w.kw, biasv, tile);
          transpose_out(tile, V, dst + oy * s.out_w + ox, L, std::min<int64_t>(P, s.out_w - ox), vc, scratch);
        }
      }
    }
  });
}

}  // namespace
}  // namespace customops::depthwise_impl
