// im2col's and col2im's CPU loops on raw pointers, shared by libtorch's CPU kernels (kernels/cpu/fold.cpp) and
// ExecuTorch's (kernels/executorch/fold.cpp): one formula, every runtime.
#pragma once

#include <algorithm>
#include <cstdint>

namespace customops::fold {

// Window parameters, validated; each is {height, width}.
struct Window {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

// Window positions along an axis of `size` (the callers have checked that the window fits its padded size).
inline int64_t window_count(int64_t size, int64_t k, int64_t d, int64_t p, int64_t s) {
  return (size + 2 * p - d * (k - 1) - 1) / s + 1;
}

// (n - 1) * s + (k - 1) * d + 1 in *r: the extent that n windows of k taps, d apart, s apart from each other,
// read along an axis; false where it overflows int64 (huge stride or dilation), where it cannot be staged.
inline bool reach(int64_t n, int64_t k, int64_t d, int64_t s, int64_t* r) {
  int64_t a = 0, b = 0;
  return !__builtin_mul_overflow(n - 1, s, &a) && !__builtin_mul_overflow(k - 1, d, &b) &&
         !__builtin_add_overflow(a, b, r) && !__builtin_add_overflow(*r, int64_t{1}, r);
}

// Internal linkage: the CPU kernels compile this once per instruction set (kernels/cpu/), and one shared
// symbol would let the linker keep any one of those copies for every caller.
namespace {

// im2col's output rows [begin, end) of the (N * C*kh*kw) rows of L = oh * ow columns: row nr is image n's fixed
// (c, i, j) across all windows. src: (N, C, H, W), dst: (N, C*kh*kw, L), contiguous.
template <typename scalar_t>
void im2col_rows(const scalar_t* src, scalar_t* dst, const Window& w, int64_t C, int64_t H, int64_t W, int64_t oh,
                 int64_t ow, int64_t begin, int64_t end) {
  const int64_t rows = C * w.kh * w.kw, L = oh * ow;
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
}

// col2im's (n, c) planes [begin, end): each accumulated in acc (H * W values of the accumulation type, the
// caller's) window entry by window entry in a fixed order: no atomics, identical results run to run, and no
// per-pixel division (unlike the GPU's gather). src: (N, C*kh*kw, L), dst: (N, C, H, W), contiguous.
template <typename scalar_t, typename opmath_t>
void col2im_planes(const scalar_t* src, scalar_t* dst, const Window& w, int64_t H, int64_t W, int64_t oh,
                   int64_t ow, int64_t begin, int64_t end, opmath_t* acc) {
  const int64_t L = oh * ow;
  for (int64_t nc = begin; nc < end; ++nc) {
    std::fill(acc, acc + H * W, opmath_t(0));
    const scalar_t* planes = src + nc * w.kh * w.kw * L;
    for (int64_t i = 0; i < w.kh; ++i) {
      for (int64_t j = 0; j < w.kw; ++j) {
        const scalar_t* row = planes + (i * w.kw + j) * L;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t h = y * w.sh - w.ph + i * w.dh;
          if (h < 0 || h >= H) continue;
          opmath_t* line = acc + h * W;
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t col = x * w.sw - w.pw + j * w.dw;
            if (col >= 0 && col < W) line[col] += static_cast<opmath_t>(row[y * ow + x]);
          }
        }
      }
    }
    scalar_t* plane = dst + nc * H * W;
    for (int64_t k = 0; k < H * W; ++k) plane[k] = static_cast<scalar_t>(acc[k]);
  }
}

} // namespace
} // namespace customops::fold
