// depthwise_conv2d on CPU, channels_last: what nhwc_gather.h (forward, input
// gradient) and nhwc_wgrad.cpp (weight gradient) share: the products' terms,
// NHWC rows as whole opmath vectors (staged where the tensor's own layout or
// type does not allow it), the prefetches, and the forward's lanes and rows,
// which the weight gradient reads too. Compiled into each CPU capability
// build: namespace customops::cpu::CPU_CAPABILITY::depthwise_nhwc.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/conv2d.h"

namespace customops::cpu::CPU_CAPABILITY::depthwise_nhwc {

template <typename T>
using Vec = at::vec::Vectorized<T>;

inline int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// Remainder of a / b in [0, b) for b > 0, also for negative a.
inline int64_t mod(int64_t a, int64_t b) {
  return (a % b + b) % b;
}

// a / b rounded down, for b > 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  return (a - mod(a, b)) / b;
}

// One product of a sum: element offsets of its tap vector (in a tap table or,
// for the weight gradient, in the table of tap sums) and of its source vector.
struct Term {
  int64_t tap, src;
};

// A tap row or column that lands inside the source: the element offsets of
// its taps and of the source row or column it reads.
using Reach = Term;

// n converted values from src to dst.
template <typename scalar_t, typename opmath_t>
void to_opmath(const scalar_t* src, opmath_t* dst, int64_t n) {
  if constexpr (std::is_same_v<scalar_t, opmath_t>) {
    std::copy(src, src + n, dst);
  } else {
    constexpr int64_t V = Vec<opmath_t>::size();
    int64_t k = 0;
    for (; k + V <= n; k += V) {
      Vec<opmath_t> v;
      at::vec::load_to_float(src + k, v);
      v.store(dst + k);
    }
    for (; k < n; ++k) dst[k] = static_cast<opmath_t>(src[k]);
  }
}

// A buffer of n elements aligned to a cache line, so that whole-vector loads
// of vector-aligned offsets never straddle two lines.
template <typename T>
class Aligned {
 public:
  explicit Aligned(int64_t n) : storage_(n + kLine) {
    const auto misalign = int64_t(reinterpret_cast<uintptr_t>(storage_.data()) % 64 / sizeof(T));
    data_ = storage_.data() + (misalign == 0 ? 0 : kLine - misalign);
  }
  T* data() {
    return data_;
  }

 private:
  static constexpr int64_t kLine = 64 / sizeof(T);
  std::vector<T> storage_;
  T* data_;
};

// Rows of an NHWC tensor (images of height x width pixels of `channels`
// elements) as pixels of whole opmath vectors: lane k of a pixel holds channel
// lanes[k], or zero where lanes[k] < 0. Read in place where that is the
// tensor's own layout and type; otherwise rows are staged into `slots` rows
// that row y shares with y +- slots (so the rows of any window of `slots`
// consecutive rows are held together).
template <typename scalar_t, typename opmath_t>
class Rows {
 public:
  Rows(const scalar_t* data, int64_t height, int64_t width, int64_t channels, const std::vector<int64_t>& lanes,
       int64_t slots)
      : data_(data),
        height_(height),
        width_(width),
        channels_(channels),
        pitch_(lanes.size()),
        lanes_(lanes),
        identity_(identity(lanes, channels)),
        direct_(std::is_same_v<scalar_t, opmath_t> && identity_ && pitch_ == channels),
        slots_(direct_ ? 0 : slots),
        buf_(slots_ * width * pitch_),
        tags_(slots_, -1) {}

  // Offsets are from here.
  const opmath_t* origin() {
    if constexpr (std::is_same_v<scalar_t, opmath_t>) {
      if (direct_) return data_;
    }
    return buf_.data();
  }

  // Elements between pixels.
  int64_t pitch() const {
    return pitch_;
  }

  // The offset of row y of image n, staged if need be.
  int64_t row(int64_t n, int64_t y) {
    const int64_t r = n * height_ + y;
    if (direct_) return r * width_ * channels_;
    const int64_t slot = y % slots_;
    const int64_t at = slot * width_ * pitch_;
    if (tags_[slot] != r) {
      stage(data_ + r * width_ * channels_, buf_.data() + at);
      tags_[slot] = r;
    }
    return at;
  }

 private:
  static bool identity(const std::vector<int64_t>& lanes, int64_t channels) {
    for (int64_t k = 0; k < int64_t(lanes.size()); ++k) {
      if (lanes[k] != (k < channels ? k : -1)) return false;
    }
    return true;
  }

  void stage(const scalar_t* src, opmath_t* dst) const {
    if (identity_ && pitch_ == channels_) {
      to_opmath(src, dst, width_ * channels_);
      return;
    }
    for (int64_t x = 0; x < width_; ++x, src += channels_, dst += pitch_) {
      if (identity_) {
        to_opmath(src, dst, channels_);
        std::fill(dst + channels_, dst + pitch_, opmath_t(0));
      } else {
        for (int64_t k = 0; k < pitch_; ++k) {
          dst[k] = lanes_[k] < 0 ? opmath_t(0) : static_cast<opmath_t>(src[lanes_[k]]);
        }
      }
    }
  }

  const scalar_t* data_;
  int64_t height_, width_, channels_, pitch_;
  const std::vector<int64_t>& lanes_;
  bool identity_, direct_;
  int64_t slots_;
  Aligned<opmath_t> buf_;
  std::vector<int64_t> tags_;  // the row (n * height + y) each slot holds
};

// Asks for the lines of [p, p + n) ahead of their use: rows that a kernel
// reads a vector per pixel, pixels far apart, defeat the hardware prefetchers.
template <typename T>
void prefetch(const T* p, int64_t n) {
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t e = 0; e < n; e += kLine) __builtin_prefetch(p + e, 0, 3);
}

// Lanes of staged input rows for the forward and the weight gradient (output
// lane o reads input channel o / m; m = 1 for the output gradient there).
inline std::vector<int64_t> spread_lanes(int64_t O, int64_t m, int64_t lanes) {
  std::vector<int64_t> map(lanes, -1);
  for (int64_t o = 0; o < O; ++o) map[o] = o / m;
  return map;
}

// Tap rows i of output row oy (forward geometry) that land inside the input.
template <typename scalar_t, typename opmath_t>
void input_rows(const fold::Window& w, int64_t H, int64_t lanes, int64_t n, int64_t oy, Rows<scalar_t, opmath_t>& x,
                std::vector<Reach>& rows) {
  rows.clear();
  for (int64_t i = 0; i < w.kh; ++i) {
    const int64_t iy = oy * w.sh - w.ph + i * w.dh;
    if (iy >= 0 && iy < H) rows.push_back({i * w.kw * lanes, x.row(n, iy)});
  }
}

inline void check_layout(const conv::DepthwisePlan& p) {
  TORCH_INTERNAL_ASSERT(p.channels_last && p.x.is_contiguous(at::MemoryFormat::ChannelsLast) &&
                        p.weight.is_contiguous() && (!p.bias.defined() || p.bias.is_contiguous()));
}

} // namespace customops::cpu::CPU_CAPABILITY::depthwise_nhwc
