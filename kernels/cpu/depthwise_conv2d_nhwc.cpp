// depthwise_conv2d on CPU for channels_last tensors, natively in NHWC. A vector
// holds V consecutive channels of one pixel, which is how NHWC already lies in
// memory, so the kernels read the tensors in place: no transpose and no padded
// copy. Borders are handled by clamping each output pixel's taps to those that
// land inside the image.
//
// Forward and input gradient are one gather: the input gradient is the
// correlation of the output gradient with the flipped taps (each input pixel
// sums the taps that read it, so no memory is read-modified-written, at any
// stride). At unit column stride and dilation (and the forward's column
// stride 2 with up to 3 tap columns) the gather runs as row blocks: a block of
// P pixels of one output row keeps J taps of a tap row in registers and loads
// each source vector once for all the taps that meet it, so it does far fewer
// loads than multiply-adds; blocks at the image's edge skip the columns
// outside it. Other strides list each output's products as terms (element
// offsets of a tap vector and of the source vector it multiplies), built once
// per row for the pixels whose taps all land inside (their terms differ by a
// shift) and once per border pixel. Large outputs are written with streaming
// stores, and each row's loop asks for the source rows of the next one ahead.
//
// The weight gradient, at unit column stride and dilation, holds the sums of
// a few tap rows' taps and a block of output-gradient vectors in registers and
// loads each input vector once for all the sums it feeds; the pixels near the
// border, and other strides, go as tiles of up to 12 taps' sums over the
// pixels all of them read, the rest tap by tap. Its sums run over fixed chunks
// of rows, each into a table of its own, added in a fixed order at the end:
// the same result at any thread count.
//
// Where vectors cannot read a tensor in place (half types, which compute in
// float; a channel count that is not a multiple of V; a channel multiplier
// m > 1, where output channel o reads input channel o / m), its rows are staged
// once into opmath rows of whole vectors, in a ring that holds the rows one
// output row reads, so each row is converted once per thread.
#include "kernels/cpu/depthwise_conv2d_nhwc.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
#include <immintrin.h>
#define CUSTOMOPS_STREAMING_STORES 1
#endif

#include <algorithm>
#include <functional>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec_store.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

template <typename T>
using Vec = at::vec::Vectorized<T>;

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// Remainder of a / b in [0, b) for b > 0, also for negative a.
int64_t mod(int64_t a, int64_t b) {
  return (a % b + b) % b;
}

// a / b rounded down, for b > 0.
int64_t floor_div(int64_t a, int64_t b) {
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

// dst[0..n) = src[0..n) with non-temporal stores where the ISA has them: a
// large output is written without first reading its lines into the cache.
// dst vector-aligned, n a multiple of the vector size (of this build's ISA).
template <typename T>
void stream_copy(const T* src, T* dst, int64_t n) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t k = 0; k < n; k += 16) _mm512_stream_ps(dst + k, _mm512_load_ps(src + k));
    return;
  } else if constexpr (std::is_same_v<T, double>) {
    for (int64_t k = 0; k < n; k += 8) _mm512_stream_pd(dst + k, _mm512_load_pd(src + k));
    return;
  }
#elif defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t k = 0; k < n; k += 8) _mm256_stream_ps(dst + k, _mm256_load_ps(src + k));
    return;
  } else if constexpr (std::is_same_v<T, double>) {
    for (int64_t k = 0; k < n; k += 4) _mm256_stream_pd(dst + k, _mm256_load_pd(src + k));
    return;
  }
#endif
  std::copy(src, src + n, dst);
}

// Outputs at least this large are written with streaming stores, so that the
// output's lines are not first read into the cache, nor push the input out of
// it. (Measured on a 2-core Zen 5, 32 MB L3: the 8x128x56x56 float32 forward,
// 3x3, took 0.47 ms so against 0.60 ms with normal stores.)
constexpr int64_t kStreamBytes = int64_t{8} << 20;

// True where an output of `channels` (== `lanes`) channels streams.
template <typename scalar_t, typename opmath_t>
bool streams(const at::Tensor& out, int64_t channels, int64_t lanes) {
#if defined(CUSTOMOPS_STREAMING_STORES)
  return std::is_same_v<scalar_t, opmath_t> && channels == lanes && out.nbytes() >= kStreamBytes &&
         reinterpret_cast<uintptr_t>(out.const_data_ptr()) % sizeof(Vec<opmath_t>) == 0;
#else
  return false;
#endif
}

// Orders this thread's streaming stores before whatever follows its task.
void stream_fence() {
#if defined(CUSTOMOPS_STREAMING_STORES)
  _mm_sfence();
#endif
}

// Asks for the lines of [p, p + n) ahead of their use: rows that a kernel
// reads a vector per pixel, pixels far apart, defeat the hardware prefetchers.
template <typename T>
void prefetch(const T* p, int64_t n) {
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t e = 0; e < n; e += kLine) __builtin_prefetch(p + e, 0, 3);
}

// Where sums go: output pixels `step` elements apart of `channels` channels
// (the last vector may be partial), each starting from init (or zero).
template <typename opmath_t, typename out_t>
struct Sink {
  out_t* out;
  int64_t step, channels;
  const opmath_t* init;
  // Where set (an output of whole vectors, pixels `channels` apart), row
  // blocks are assembled here and streamed out.
  opmath_t* tile = nullptr;

  Sink at(int64_t k) const {
    Sink s = *this;
    s.out += k * step;
    return s;
  }
};

// ---- row blocks: column stride S (1 or 2), unit column dilation ----------

// acc[p] += sum over j < J of taps[j * tstep] * row[(col + S * p + j) * step]
// for P pixels S columns apart; with Clip, columns outside [0, width) are zero
// padding (not read, nor multiplied). Each source vector is loaded once for
// all the J taps (held in registers) that meet it.
template <int P, int J, bool Clip, int S, typename opmath_t>
C10_ALWAYS_INLINE void row_taps(Vec<opmath_t> (&acc)[P], const opmath_t* taps, int64_t tstep, const opmath_t* row,
                                int64_t col, int64_t step, int64_t width) {
  Vec<opmath_t> t[J];
  for (int j = 0; j < J; ++j) t[j] = Vec<opmath_t>::loadu(taps + j * tstep);
  // Unrolled in full, so that acc stays in registers (GCC left the 19 steps of
  // a stride-2 block of 9 pixels rolled, acc in memory).
#pragma GCC unroll 64
  for (int q = 0; q < S * (P - 1) + J; ++q) {
    if (Clip && (col + q < 0 || col + q >= width)) continue;
    const auto x = Vec<opmath_t>::loadu(row + (col + q) * step);
#pragma GCC unroll 16
    for (int j = 0; j < J; ++j) {
      const int d = q - j;
      if (d >= 0 && d % S == 0 && d / S < P) acc[d / S] = at::vec::fmadd(t[j], x, acc[d / S]);
    }
  }
}

// row_taps over the KW taps of a tap row from J0 on, J at a time.
template <int P, int KW, int J, bool Clip, int S, int J0 = 0, typename opmath_t>
C10_ALWAYS_INLINE void row_static(Vec<opmath_t> (&acc)[P], const opmath_t* taps, int64_t tstep, const opmath_t* row,
                                  int64_t col, int64_t step, int64_t width) {
  if constexpr (J0 < KW) {
    constexpr int n = std::min(J, KW - J0);
    row_taps<P, n, Clip, S>(acc, taps + J0 * tstep, tstep, row, col + J0, step, width);
    row_static<P, KW, J, Clip, S, J0 + n>(acc, taps, tstep, row, col, step, width);
  }
}

// The same for kw known at run time only, three taps at a time.
template <int P, bool Clip, int S, typename opmath_t>
C10_ALWAYS_INLINE void row_dynamic(Vec<opmath_t> (&acc)[P], const opmath_t* taps, int64_t tstep, const opmath_t* row,
                                   int64_t col, int64_t step, int64_t width, int64_t kw) {
  int64_t j = 0;
  for (; j + 3 <= kw; j += 3) row_taps<P, 3, Clip, S>(acc, taps + j * tstep, tstep, row, col + j, step, width);
  if (kw - j == 2) {
    row_taps<P, 2, Clip, S>(acc, taps + j * tstep, tstep, row, col + j, step, width);
  } else if (kw - j == 1) {
    row_taps<P, 1, Clip, S>(acc, taps + j * tstep, tstep, row, col + j, step, width);
  }
}

// Pixels p < P of a block whose pixel p reads source columns col + S * p + j
// for taps j < kw: s.out[p][c..] = init[c..] + sum over rows r and j of
// taps[r.tap + j * lanes + c..] * src[r.src + (col + S * p + j) * step + c..].
// KW is kw, or 0 where kw is known at run time only.
template <int P, int KW, int J, bool Clip, int S, typename opmath_t, typename out_t>
void row_block(const std::vector<Term>& rows, int64_t kw, const opmath_t* taps, int64_t lanes, const opmath_t* src,
               int64_t col, int64_t step, int64_t width, const Sink<opmath_t, out_t>& s) {
  constexpr int64_t V = Vec<opmath_t>::size();
  for (int64_t c = 0; c < lanes; c += V) {
    Vec<opmath_t> acc[P];
    const auto init = s.init != nullptr ? Vec<opmath_t>::loadu(s.init + c) : Vec<opmath_t>(0);
    for (int p = 0; p < P; ++p) acc[p] = init;
    // Every other vector of channels takes the rows in reverse order: it
    // reads the other half of the same cache lines, and starts with those the
    // previous one used last. (The rows' lines, channels_last pixels apart,
    // fall into few cache sets, and the first ones are often gone.)
    const bool reverse = c / V % 2 == 1;
    for (int64_t e = 0; e < int64_t(rows.size()); ++e) {
      const Term& r = rows[reverse ? rows.size() - 1 - e : e];
      if constexpr (KW > 0) {
        row_static<P, KW, J, Clip, S>(acc, taps + r.tap + c, lanes, src + r.src + c, col, step, width);
      } else {
        row_dynamic<P, Clip, S>(acc, taps + r.tap + c, lanes, src + r.src + c, col, step, width, kw);
      }
    }
    if (s.tile != nullptr) {
      for (int p = 0; p < P; ++p) acc[p].store(s.tile + p * lanes + c);
    } else {
      for (int p = 0; p < P; ++p) store_lanes(acc[p], s.out + p * s.step + c, s.channels - c);
    }
  }
  if constexpr (std::is_same_v<out_t, opmath_t>) {
    if (s.tile != nullptr) stream_copy(s.tile, s.out, P * lanes);
  }
}

// The block of P output pixels from k, whose pixel k reads columns
// S * k - pad + j; columns outside [0, width) are padding.
template <int P, int KW, int J, int S, typename opmath_t, typename out_t>
void row_block_at(const std::vector<Term>& rows, int64_t kw, const opmath_t* taps, int64_t lanes, const opmath_t* src,
                  int64_t step, int64_t pad, int64_t width, int64_t k, const Sink<opmath_t, out_t>& s) {
  const int64_t col = S * k - pad;
  if (col >= 0 && col + S * (P - 1) + kw <= width) {
    row_block<P, KW, J, false, S>(rows, kw, taps, lanes, src, col, step, width, s.at(k));
  } else {
    row_block<P, KW, J, true, S>(rows, kw, taps, lanes, src, col, step, width, s.at(k));
  }
}

// Blocks of P pixels with J taps in registers take P + J + 1 of AVX2's 16
// vector registers; one more is left for the compiler (at 16 it spills).
// J is the whole tap row where that fits, else 4 or 3 taps at a time. (On a
// Zen 5 core the loop alone reaches 80-97% of the AVX2 multiply-add peak for
// 3x3 to 7x7 taps with the source in L1 or L2; the whole forward of one
// 128x56x56 image, 3x3 about 60%, 7x7 about 85%.)
// kMaxBlock >= 2 * kMinBlock - 1, so that splitting a line never leaves a
// block narrower than kMinBlock.
constexpr int kMaxBlock = 10, kMinBlock = 5;
static_assert(kMaxBlock >= 2 * kMinBlock - 1);

constexpr int taps_at_once(int P, int KW) {
  if (KW == 0) return 3;
  // (5 taps: GCC spills at 15 registers with 5 or 4 taps a chunk; 3 do not.)
  const int limit = KW == 5 ? 14 : 15;
  if (P + KW + 1 <= limit) return KW;
  return KW != 5 && P + 4 + 1 <= limit ? 4 : 3;
}

template <int P, int KW, int S, typename opmath_t, typename out_t>
void row_block_p(const std::vector<Term>& rows, int64_t kw, const opmath_t* taps, int64_t lanes, const opmath_t* src,
                 int64_t step, int64_t pad, int64_t width, int64_t k, const Sink<opmath_t, out_t>& s) {
  row_block_at<P, KW, taps_at_once(P, KW), S>(rows, kw, taps, lanes, src, step, pad, width, k, s);
}

// gather_channels, defined below.
template <int P, int CB, typename opmath_t, typename out_t>
void gather_channels(const std::vector<Term>& terms, const opmath_t* taps, const opmath_t* src, int64_t step,
                     const Sink<opmath_t, out_t>& s, int64_t lanes, int64_t c = 0);

// Pixels [k0, k1) of a line, at least kMinBlock of them, in the fewest blocks
// of at most kMaxBlock, of near-equal sizes (so no pixel is computed twice
// and every block keeps at least kMinBlock multiply-add chains in flight).
template <int KW, int S, typename opmath_t, typename out_t>
void row_blocks(const std::vector<Term>& rows, int64_t kw, const opmath_t* taps, int64_t lanes, const opmath_t* src,
                int64_t step, int64_t pad, int64_t width, int64_t k0, int64_t k1, const Sink<opmath_t, out_t>& s) {
  const auto args = std::make_tuple(std::cref(rows), kw, taps, lanes, src, step, pad, width);
  auto at = [&](auto block, int64_t k) { std::apply(block, std::tuple_cat(args, std::make_tuple(k, std::cref(s)))); };
  const int64_t count = k1 - k0;
  const int64_t blocks = (count + kMaxBlock - 1) / kMaxBlock, size = count / blocks, wider = count % blocks;
  int64_t k = k0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t P = size + (b < wider);
    switch (P) {
      case 5: at(row_block_p<5, KW, S, opmath_t, out_t>, k); break;
      case 6: at(row_block_p<6, KW, S, opmath_t, out_t>, k); break;
      case 7: at(row_block_p<7, KW, S, opmath_t, out_t>, k); break;
      case 8: at(row_block_p<8, KW, S, opmath_t, out_t>, k); break;
      case 9: at(row_block_p<9, KW, S, opmath_t, out_t>, k); break;
      case 10: at(row_block_p<10, KW, S, opmath_t, out_t>, k); break;
      default: TORCH_INTERNAL_ASSERT(false, "row block of ", P, " pixels");
    }
    k += P;
  }
}

// A block that skips the columns outside the image runs about 1.7x slower a
// pixel than one that does not. With 3 taps a row, the pixels whose taps all
// land inside go in unclipped blocks and the one or two at each edge one at a
// time, as lists of the terms that land inside, several channel vectors at
// once; with more taps (more edge pixels, whose term lists cost more than a
// clipped block) and in lines with fewer than kMinBlock inside pixels, the
// whole line goes in blocks that skip what is outside, or, narrower than
// kMinBlock, as term lists.
template <int KW, int S, typename opmath_t, typename out_t>
void row_line_sized(const std::vector<Term>& rows, int64_t kw, const opmath_t* taps, int64_t lanes,
                    const opmath_t* src, int64_t step, int64_t pad, int64_t width, int64_t count,
                    const Sink<opmath_t, out_t>& s, std::vector<Term>& terms) {
  auto one = [&](int64_t k) {
    terms.clear();
    for (const auto& r : rows) {
      for (int64_t j = std::max<int64_t>(0, pad - S * k); j < std::min(kw, width + pad - S * k); ++j) {
        terms.push_back({r.tap + j * lanes, r.src + (S * k - pad + j) * step});
      }
    }
    gather_channels<1, 8>(terms, taps, src, 0, s.at(k), lanes);
  };
  // Pixels [a, b) read columns S * k - pad + j inside [0, width) only.
  const int64_t a = std::clamp<int64_t>((pad + S - 1) / S, 0, count);
  const int64_t b = width - kw + pad < 0 ? a : std::clamp<int64_t>((width - kw + pad) / S + 1, a, count);
  if (b - a >= kMinBlock && kw <= 3) {
    for (int64_t k = 0; k < a; ++k) one(k);
    row_blocks<KW, S>(rows, kw, taps, lanes, src, step, pad, width, a, b, s);
    for (int64_t k = b; k < count; ++k) one(k);
  } else if (count >= kMinBlock) {
    row_blocks<KW, S>(rows, kw, taps, lanes, src, step, pad, width, 0, count, s);
  } else {
    for (int64_t k = 0; k < count; ++k) one(k);
  }
}

// Every output pixel k < count of a line whose pixel k reads, from each row r
// (tap offset r.tap, source offset r.src), source columns S * k - pad + j for
// taps j < kw, one `step` apart; `terms` is scratch.
template <int S = 1, typename opmath_t, typename out_t>
void row_line(const std::vector<Term>& rows, int64_t kw, const opmath_t* taps, int64_t lanes, const opmath_t* src,
              int64_t step, int64_t pad, int64_t width, int64_t count, const Sink<opmath_t, out_t>& s,
              std::vector<Term>& terms) {
  if constexpr (S != 1) {  // (the forward's stride 2 takes up to 3 tap columns)
    if (kw == 3) return row_line_sized<3, S>(rows, kw, taps, lanes, src, step, pad, width, count, s, terms);
    return row_line_sized<0, S>(rows, kw, taps, lanes, src, step, pad, width, count, s, terms);
  }
  switch (kw) {
    case 3: return row_line_sized<3, S>(rows, kw, taps, lanes, src, step, pad, width, count, s, terms);
    case 5: return row_line_sized<5, S>(rows, kw, taps, lanes, src, step, pad, width, count, s, terms);
    case 7: return row_line_sized<7, S>(rows, kw, taps, lanes, src, step, pad, width, count, s, terms);
    default: return row_line_sized<0, S>(rows, kw, taps, lanes, src, step, pad, width, count, s, terms);
  }
}

// ---- gathers over term lists: any stride and dilation ---------------------

// out[px][c..] = init[c..] + sum over terms of taps[tap + c..] * src[src + px * step + c..]
// for P pixels and the channel vectors c in [c0, c1), CB at a time.
template <int P, int CB, typename opmath_t, typename out_t>
void gather(const Term* terms, int64_t n_terms, const opmath_t* taps, const opmath_t* src, int64_t step,
            const Sink<opmath_t, out_t>& s, int64_t c0, int64_t c1) {
  constexpr int64_t V = Vec<opmath_t>::size();
  for (int64_t c = c0; c < c1; c += CB * V) {
    Vec<opmath_t> acc[P][CB];
    for (int b = 0; b < CB; ++b) {
      const auto v = s.init != nullptr ? Vec<opmath_t>::loadu(s.init + c + b * V) : Vec<opmath_t>(0);
      for (int px = 0; px < P; ++px) acc[px][b] = v;
    }
    for (int64_t e = 0; e < n_terms; ++e) {
      const opmath_t* t = taps + terms[e].tap + c;
      const opmath_t* x = src + terms[e].src + c;
      Vec<opmath_t> tv[CB];
      for (int b = 0; b < CB; ++b) tv[b] = Vec<opmath_t>::loadu(t + b * V);
      for (int px = 0; px < P; ++px) {
        for (int b = 0; b < CB; ++b) {
          acc[px][b] = at::vec::fmadd(tv[b], Vec<opmath_t>::loadu(x + px * step + b * V), acc[px][b]);
        }
      }
    }
    for (int px = 0; px < P; ++px) {
      for (int b = 0; b < CB; ++b) store_lanes(acc[px][b], s.out + px * s.step + c + b * V, s.channels - c - b * V);
    }
  }
}

// gather over the channel vectors [c, lanes), CB at a time, the rest fewer.
template <int P, int CB, typename opmath_t, typename out_t>
void gather_channels(const std::vector<Term>& terms, const opmath_t* taps, const opmath_t* src, int64_t step,
                     const Sink<opmath_t, out_t>& s, int64_t lanes, int64_t c) {
  constexpr int64_t V = Vec<opmath_t>::size();
  const int64_t c1 = c + (lanes - c) / (CB * V) * (CB * V);
  if (c < c1) gather<P, CB>(terms.data(), terms.size(), taps, src, step, s, c, c1);
  if constexpr (CB > 1) {
    if (c1 < lanes) gather_channels<P, CB / 2>(terms, taps, src, step, s, lanes, c1);
  }
}

// A line of `count` output pixels whose full pixels (those whose taps all land
// inside, full_cols tap columns) form one run, each reading `step` source
// elements after the previous one. cols(k, reaches) lists pixel k's tap
// columns that land inside.
struct Line {
  int64_t count, full_cols, step;
};

template <typename Cols>
std::pair<int64_t, int64_t> full_run(const Line& l, Cols& cols, std::vector<Reach>& reaches) {
  int64_t lo = 0, hi = l.count;
  while (lo < l.count && (cols(lo, reaches), int64_t(reaches.size()) != l.full_cols)) ++lo;
  while (hi > lo && (cols(hi - 1, reaches), int64_t(reaches.size()) != l.full_cols)) --hi;
  return {lo, hi};
}

// The terms of tap rows `rows` by tap columns `cols`, for each of `groups`
// groups of taps and source lanes (`gtap`, `gsrc` elements apart).
void terms_of(const std::vector<Reach>& rows, const std::vector<Reach>& cols, int64_t groups, int64_t gtap,
              int64_t gsrc, std::vector<Term>& terms) {
  terms.resize(groups * rows.size() * cols.size());
  Term* t = terms.data();
  for (int64_t g = 0; g < groups; ++g) {
    for (const auto& r : rows) {
      for (const auto& q : cols) *t++ = {g * gtap + r.tap + q.tap, g * gsrc + r.src + q.src};
    }
  }
}

// A tap table and how its sums are grouped.
template <typename opmath_t>
struct Gather {
  const opmath_t* taps;
  int64_t lanes;         // padded channels of one group: taps and source pixels hold whole vectors
  int64_t groups, gtap;  // groups of lanes summed into each output (source lanes are `lanes` apart)
};

// Every output pixel of line l (pixel k at s.out + k * s.step), its source
// rows `rows`. Full pixels go several at a time; border ones one at a time,
// several channel vectors at once so that enough multiply-adds are in flight.
template <typename opmath_t, typename out_t, typename Cols>
void gather_line(const Gather<opmath_t>& g, const Line& l, Cols cols, const std::vector<Reach>& rows,
                 const opmath_t* src, const Sink<opmath_t, out_t>& s, std::vector<Reach>& reaches,
                 std::vector<Term>& terms) {
  auto one = [&](int64_t k) {
    cols(k, reaches);
    terms_of(rows, reaches, g.groups, g.gtap, g.lanes, terms);
    gather_channels<1, 8>(terms, g.taps, src, 0, s.at(k), g.lanes);
  };
  const auto [lo, hi] = full_run(l, cols, reaches);
  for (int64_t k = 0; k < lo; ++k) one(k);
  if (lo < hi) {
    cols(lo, reaches);
    terms_of(rows, reaches, g.groups, g.gtap, g.lanes, terms);
    auto first = [&](int64_t k) { return src + (k - lo) * l.step; };  // where pixel k reads its terms
    int64_t k = lo;
    for (; k + 8 <= hi; k += 8) gather_channels<8, 1>(terms, g.taps, first(k), l.step, s.at(k), g.lanes);
    if (k + 4 <= hi) {
      gather_channels<4, 2>(terms, g.taps, first(k), l.step, s.at(k), g.lanes);
      k += 4;
    }
    if (k + 2 <= hi) {
      gather_channels<2, 4>(terms, g.taps, first(k), l.step, s.at(k), g.lanes);
      k += 2;
    }
    if (k < hi) gather_channels<1, 8>(terms, g.taps, first(k), 0, s.at(k), g.lanes);
  }
  for (int64_t k = std::max(lo, hi); k < l.count; ++k) one(k);
}

// ---- forward and input gradient -------------------------------------------

// table[t][tap][c] = weight[c * m + t][tap] for tap in [0, n_taps) (in
// reverse order where `flipped`), as opmath, zero for c past `channels` up to
// `lanes`: the taps of group t (m groups).
template <typename scalar_t, typename opmath_t>
std::vector<opmath_t> tap_table(const at::Tensor& weight, int64_t channels, int64_t m, int64_t lanes, bool flipped) {
  const int64_t n_taps = weight.size(1);
  const scalar_t* wt = weight.const_data_ptr<scalar_t>();
  std::vector<opmath_t> table(m * n_taps * lanes, opmath_t(0));
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t tap = 0; tap < n_taps; ++tap) {
        table[(t * n_taps + tap) * lanes + c] =
            static_cast<opmath_t>(wt[(c * m + t) * n_taps + (flipped ? n_taps - 1 - tap : tap)]);
      }
    }
  }
  return table;
}

// Lanes of staged input rows for the forward and the weight gradient (output
// lane o reads input channel o / m; m = 1 for the output gradient there).
std::vector<int64_t> spread_lanes(int64_t O, int64_t m, int64_t lanes) {
  std::vector<int64_t> map(lanes, -1);
  for (int64_t o = 0; o < O; ++o) map[o] = o / m;
  return map;
}

// Lanes of staged output-gradient rows for the input gradient: group t holds
// output channels c * m + t of c < C, so that lane c of every group belongs to
// input channel c.
std::vector<int64_t> gathered_lanes(int64_t C, int64_t m, int64_t lanes) {
  std::vector<int64_t> map(m * lanes, -1);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t c = 0; c < C; ++c) map[t * lanes + c] = c * m + t;
  }
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

// Tap columns j of output column ox that land inside the input.
struct InputCols {
  const fold::Window& w;
  int64_t W, lanes, pitch;
  void operator()(int64_t ox, std::vector<Reach>& cols) const {
    cols.clear();
    for (int64_t j = 0; j < w.kw; ++j) {
      const int64_t ix = ox * w.sw - w.pw + j * w.dw;
      if (ix >= 0 && ix < W) cols.push_back({j * lanes, ix * pitch});
    }
  }
};

template <typename scalar_t>
void forward(const conv::DepthwisePlan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int64_t V = Vec<opmath_t>::size();
  const auto& s = p.s;
  const auto& w = p.w;
  if (p.out.numel() == 0) return;
  const int64_t lanes = round_up(s.O, V), n_taps = w.kh * w.kw;
  const auto taps = tap_table<scalar_t, opmath_t>(p.weight, s.O, 1, lanes, false);
  std::vector<opmath_t> bias;
  if (p.bias.defined()) {
    bias.assign(lanes, opmath_t(0));
    to_opmath(p.bias.const_data_ptr<scalar_t>(), bias.data(), s.O);
  }
  const auto map = spread_lanes(s.O, p.m, lanes);
  const int64_t slots = std::min((w.kh - 1) * w.dh + 1, s.H);
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();
  scalar_t* out = p.out.data_ptr<scalar_t>();
  // Column stride 2 (MobileNet's downsampling layers) with up to 3 tap columns
  // runs row blocks too: a block loads each source vector once for the one or
  // two taps that meet it, where a term list loads it once a tap (float32,
  // 8x96x112x112, two threads: 0.9 of the term lists' time; half types, whose
  // rows are staged, the same). Wider windows keep the term lists: their row
  // lines go in clipped blocks, which measured slower.
  const bool unit = w.sw == 1 && w.dw == 1;
  const bool halving = w.sw == 2 && w.dw == 1 && w.kw <= 3;
  const bool stream = (unit || halving) && streams<scalar_t, opmath_t>(p.out, s.O, lanes);
  const Gather<opmath_t> g{taps.data(), lanes, 1, 0};
  at::parallel_for(0, s.N * s.out_h, grain(s.out_w * s.O * n_taps), [&](int64_t begin, int64_t end) {
    Aligned<opmath_t> tile(stream ? kMaxBlock * lanes : 0);
    Rows<scalar_t, opmath_t> rows_of(x, s.H, s.W, s.C, map, slots);
    const int64_t pitch = rows_of.pitch();
    const InputCols cols{w, s.W, lanes, pitch};
    const Line line{s.out_w, w.kw, w.sw * pitch};
    std::vector<Reach> rows, reaches;
    std::vector<Term> terms;
    for (int64_t r = begin; r < end; ++r) {
      // The input rows that the next output row reads and this one does not
      // (up to sh of them) are asked for now, so that they arrive while this
      // row is computed: the hardware prefetchers, which see a channel
      // vector's loads a pixel apart, left the forward waiting on memory
      // (8x144x56x56 float32 3x3, one and two threads: 1.12-1.38x PyTorch's
      // time without, 0.70-0.98x with, over runs; one cached image unchanged).
      if (r + 1 < end) {
        const int64_t n1 = (r + 1) / s.out_h, top = (r + 1) % s.out_h * w.sh - w.ph;
        const int64_t last = top + (w.kh - 1) * w.dh;  // past this row's last by sh
        for (int64_t iy = last; iy > last - w.sh && iy >= top; iy -= w.dh) {
          if (iy >= 0 && iy < s.H) prefetch(x + (n1 * s.H + iy) * s.W * s.C, s.W * s.C);
        }
      }
      input_rows(w, s.H, lanes, r / s.out_h, r % s.out_h, rows_of, rows);
      const Sink<opmath_t, scalar_t> sink{out + r * s.out_w * s.O, s.O, s.O, bias.empty() ? nullptr : bias.data(),
                                          stream ? tile.data() : nullptr};
      if (unit) {
        row_line(rows, w.kw, taps.data(), lanes, rows_of.origin(), pitch, w.pw, s.W, s.out_w, sink, terms);
      } else if (halving) {
        row_line<2>(rows, w.kw, taps.data(), lanes, rows_of.origin(), pitch, w.pw, s.W, s.out_w, sink, terms);
      } else {
        gather_line(g, line, cols, rows, rows_of.origin(), sink, reaches, terms);
      }
    }
    if (stream) stream_fence();
  });
}

template <typename scalar_t>
void input_grad(const conv::DepthwiseBackwardPlan& bp, at::Tensor& grad_input) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int64_t V = Vec<opmath_t>::size();
  const auto& p = bp.p;
  const auto& s = p.s;
  const auto& w = p.w;
  if (grad_input.numel() == 0) return;
  const int64_t lanes = round_up(s.C, V), n_taps = w.kh * w.kw;
  const auto taps = tap_table<scalar_t, opmath_t>(p.weight, s.C, p.m, lanes, true);
  const auto map = gathered_lanes(s.C, p.m, lanes);
  // The output rows that input row y reads lie within (kh-1)*dh/sh + 1 rows.
  const int64_t slots = std::min((w.kh - 1) * w.dh / w.sh + 1, s.out_h);
  const scalar_t* gout = bp.gout.const_data_ptr<scalar_t>();
  scalar_t* gi = grad_input.data_ptr<scalar_t>();
  const bool unit = w.sw == 1 && w.dw == 1, stream = unit && streams<scalar_t, opmath_t>(grad_input, s.C, lanes);
  const Gather<opmath_t> g{taps.data(), lanes, p.m, n_taps * lanes};
  // Input columns x = phase + k * sw read the tap columns j with
  // x + pw - j * dw divisible by sw: the same ones for the whole phase.
  std::vector<int64_t> phase_cols(std::min(w.sw, s.W), 0);
  for (int64_t r = 0; r < int64_t(phase_cols.size()); ++r) {
    for (int64_t j = 0; j < w.kw; ++j) phase_cols[r] += mod(r + w.pw - j * w.dw, w.sw) == 0;
  }
  const int64_t grain_rows = grain(s.W * s.C * std::max<int64_t>(1, n_taps * p.m / (w.sh * w.sw)));
  at::parallel_for(0, s.N * s.H, grain_rows, [&](int64_t begin, int64_t end) {
    Aligned<opmath_t> tile(stream ? kMaxBlock * lanes : 0);
    Rows<scalar_t, opmath_t> rows_of(gout, s.out_h, s.out_w, s.O, map, slots);
    const int64_t pitch = rows_of.pitch();
    std::vector<Reach> rows, reaches;
    std::vector<Term> terms;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / s.H, y = r % s.H;
      // The output-gradient row that the next input row reads and this one
      // does not, asked for ahead as in the forward (8x144x56x56 float32 3x3:
      // 1.15-1.33x PyTorch's time without, 0.80-0.88x with).
      if (r + 1 < end) {
        const int64_t n1 = (r + 1) / s.H, num = (r + 1) % s.H + w.ph;
        if (num % w.sh == 0 && num / w.sh < s.out_h) {
          prefetch(gout + (n1 * s.out_h + num / w.sh) * s.out_w * s.O, s.out_w * s.O);
        }
      }
      // Tap row i (flipped: table row kh-1-i) reads output row (y + ph - i*dh) / sh where that divides.
      rows.clear();
      for (int64_t i = w.kh - 1; i >= 0; --i) {
        const int64_t num = y + w.ph - i * w.dh;
        if (num >= 0 && num % w.sh == 0 && num / w.sh < s.out_h) {
          rows.push_back({(w.kh - 1 - i) * w.kw * lanes, rows_of.row(n, num / w.sh)});
        }
      }
      if (unit) {
        // Flipped tap j reads output column x + pw - (kw-1) + j; m groups of lanes.
        terms_of(rows, {Reach{0, 0}}, p.m, n_taps * lanes, lanes, terms);
        const Sink<opmath_t, scalar_t> sink{gi + r * s.W * s.C, s.C, s.C, nullptr, stream ? tile.data() : nullptr};
        row_line(terms, w.kw, taps.data(), lanes, rows_of.origin(), pitch, w.kw - 1 - w.pw, s.out_w, s.W, sink,
                 reaches);
        continue;
      }
      for (int64_t phase = 0; phase < int64_t(phase_cols.size()); ++phase) {
        auto cols = [&](int64_t k, std::vector<Reach>& out) {
          out.clear();
          const int64_t x = phase + k * w.sw;
          for (int64_t j = w.kw - 1; j >= 0; --j) {
            const int64_t num = x + w.pw - j * w.dw;
            if (num >= 0 && num % w.sw == 0 && num / w.sw < s.out_w) {
              out.push_back({(w.kw - 1 - j) * lanes, num / w.sw * pitch});
            }
          }
        };
        const Line line{(s.W - phase + w.sw - 1) / w.sw, phase_cols[phase], pitch};
        const Sink<opmath_t, scalar_t> sink{gi + (r * s.W + phase) * s.C, w.sw * s.C, s.C, nullptr};
        gather_line(g, line, cols, rows, rows_of.origin(), sink, reaches, terms);
      }
    }
    if (stream) stream_fence();
  });
}

// ---- weight gradient --------------------------------------------------------

// sums[tap + c..] += sum over pixels px < count of g[px * gstep + c..] * x_k[px * step + c..]
// for NT terms k (x_k = src + terms[k].src) and every channel vector
// c < lanes; the products of each tap are added in pixel order.
//
// Pixels go kPixelRun at a time through all channels: the lines that a run
// reads (pixels channels_last apart fall into few cache sets) then stay in L1
// from one channel vector to the next, which reads their other half.
constexpr int64_t kPixelRun = 16;

template <int NT, typename opmath_t>
void weight_tile(const Term* terms, const opmath_t* src, int64_t step, const opmath_t* g, int64_t gstep,
                 int64_t count, int64_t lanes, opmath_t* sums) {
  constexpr int64_t V = Vec<opmath_t>::size();
  for (int64_t p0 = 0; p0 < count; p0 += kPixelRun) {
    const int64_t p1 = std::min(count, p0 + kPixelRun);
    for (int64_t c = 0; c < lanes; c += V) {
      Vec<opmath_t> acc[NT];
      const opmath_t* x[NT];
      for (int k = 0; k < NT; ++k) {
        acc[k] = Vec<opmath_t>::loadu(sums + terms[k].tap + c);
        x[k] = src + terms[k].src + c;
      }
      for (int64_t px = p0; px < p1; ++px) {
        const auto gv = Vec<opmath_t>::loadu(g + px * gstep + c);
        for (int k = 0; k < NT; ++k) acc[k] = at::vec::fmadd(gv, Vec<opmath_t>::loadu(x[k] + px * step), acc[k]);
      }
      for (int k = 0; k < NT; ++k) acc[k].store(sums + terms[k].tap + c);
    }
  }
}

// weight_tile over n terms, NT at a time: at most kMaxTile accumulators (in
// registers), tiles of near-equal sizes.
constexpr int64_t kMaxTile = 12;

template <typename opmath_t>
void weight_terms(const Term* terms, int64_t n, const opmath_t* src, int64_t step, const opmath_t* g, int64_t gstep,
                  int64_t count, int64_t lanes, opmath_t* sums) {
  if (n == 0 || count <= 0) return;
  const int64_t tiles = (n + kMaxTile - 1) / kMaxTile, size = (n + tiles - 1) / tiles;
  for (int64_t first = 0; first < n; first += size) {
    const auto args = std::make_tuple(terms + first, src, step, g, gstep, count, lanes, sums);
    switch (std::min(size, n - first)) {
      case 1: std::apply(weight_tile<1, opmath_t>, args); break;
      case 2: std::apply(weight_tile<2, opmath_t>, args); break;
      case 3: std::apply(weight_tile<3, opmath_t>, args); break;
      case 4: std::apply(weight_tile<4, opmath_t>, args); break;
      case 5: std::apply(weight_tile<5, opmath_t>, args); break;
      case 6: std::apply(weight_tile<6, opmath_t>, args); break;
      case 7: std::apply(weight_tile<7, opmath_t>, args); break;
      case 8: std::apply(weight_tile<8, opmath_t>, args); break;
      case 9: std::apply(weight_tile<9, opmath_t>, args); break;
      case 10: std::apply(weight_tile<10, opmath_t>, args); break;
      case 11: std::apply(weight_tile<11, opmath_t>, args); break;
      default: std::apply(weight_tile<12, opmath_t>, args); break;
    }
  }
}

// At unit column stride and dilation: acc[r][j] += sum over pixels p < P of
// g[p * gstep] * x[r][(off + p + j) * step], the P output-gradient vectors and
// the R x J sums held in registers, each source vector loaded once for the J
// sums it feeds.
template <int P, int R, int J, typename opmath_t>
C10_ALWAYS_INLINE void weight_block(Vec<opmath_t> (&acc)[R][J], const opmath_t* g, int64_t gstep,
                                    const opmath_t* const (&x)[R], int64_t off, int64_t step) {
  Vec<opmath_t> gv[P];
  for (int p = 0; p < P; ++p) gv[p] = Vec<opmath_t>::loadu(g + p * gstep);
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P + J - 1; ++q) {
      const auto xv = Vec<opmath_t>::loadu(x[r] + (off + q) * step);
      for (int j = 0; j < J; ++j) {
        if (q - j >= 0 && q - j < P) acc[r][j] = at::vec::fmadd(gv[q - j], xv, acc[r][j]);
      }
    }
  }
}

// sums[rows[r].tap + j * lanes + c..] += sum over pixels p < blocks * P of
// g[p * gstep + c..] * src[rows[r].src + (p + j) * step + c..] for R rows and
// J taps: blocks of P pixels, a run of them through all channels at a time
// (so that the lines a run reads stay in L1 for the next channel vector).
template <int P, int R, int J, typename opmath_t>
void weight_rows(const Reach* rows, const opmath_t* src, int64_t step, const opmath_t* g, int64_t gstep,
                 int64_t blocks, int64_t lanes, opmath_t* sums) {
  constexpr int64_t V = Vec<opmath_t>::size(), kRun = std::max(1, 24 / P);
  for (int64_t b0 = 0; b0 < blocks; b0 += kRun) {
    const int64_t b1 = std::min(blocks, b0 + kRun);
    for (int64_t c = 0; c < lanes; c += V) {
      Vec<opmath_t> acc[R][J];
      const opmath_t* x[R];
      for (int r = 0; r < R; ++r) {
        x[r] = src + rows[r].src + c;
        for (int j = 0; j < J; ++j) acc[r][j] = Vec<opmath_t>::loadu(sums + rows[r].tap + j * lanes + c);
      }
      for (int64_t b = b0; b < b1; ++b) weight_block<P, R, J>(acc, g + b * P * gstep + c, gstep, x, b * P, step);
      for (int r = 0; r < R; ++r) {
        for (int j = 0; j < J; ++j) acc[r][j].store(sums + rows[r].tap + j * lanes + c);
      }
    }
  }
}

// weight_rows over all `rows` (R at a time, fewer for the last) and the J taps
// from j0: P + R * J + 1 of AVX2's 16 vector registers.
template <int P, int RMAX, int J, typename opmath_t>
void weight_rows_all(const std::vector<Reach>& rows, const opmath_t* src, int64_t step, const opmath_t* g,
                     int64_t gstep, int64_t blocks, int64_t lanes, opmath_t* sums) {
  static_assert(P + RMAX * J + 1 <= 16 && RMAX <= 3);
  const int64_t n = rows.size();
  int64_t r = 0;
  for (; r + RMAX <= n; r += RMAX) weight_rows<P, RMAX, J>(rows.data() + r, src, step, g, gstep, blocks, lanes, sums);
  if constexpr (RMAX > 2) {
    if (n - r == 2) weight_rows<P, 2, J>(rows.data() + r, src, step, g, gstep, blocks, lanes, sums);
  }
  if constexpr (RMAX > 1) {
    if (n - r == 1) weight_rows<P, 1, J>(rows.data() + r, src, step, g, gstep, blocks, lanes, sums);
  }
}

// Pixels a block of the weight gradient's row kernel for kw taps a row.
int64_t weight_block_pixels(int64_t kw) {
  return kw == 5 ? 5 : 6;
}

// The weight gradient's sums of a row of output pixels [lo, lo + blocks * P)
// whose taps all land inside, at unit column stride and dilation: rows[r] has
// the tap offset of its tap 0 and the source offset where pixel lo's tap 0
// reads. kw 3, 5 and 7 take whole tap rows, others three taps at a time.
template <typename opmath_t>
void weight_rows_kw(const std::vector<Reach>& rows, int64_t kw, const opmath_t* src, int64_t step, const opmath_t* g,
                    int64_t gstep, int64_t blocks, int64_t lanes, opmath_t* sums, std::vector<Reach>& shifted) {
  if (blocks == 0 || rows.empty()) return;
  switch (kw) {
    case 3: return weight_rows_all<6, 3, 3>(rows, src, step, g, gstep, blocks, lanes, sums);
    case 5: return weight_rows_all<5, 2, 5>(rows, src, step, g, gstep, blocks, lanes, sums);
    case 7: return weight_rows_all<6, 1, 7>(rows, src, step, g, gstep, blocks, lanes, sums);
    default: break;
  }
  for (int64_t j0 = 0; j0 < kw; j0 += 3) {
    shifted = rows;
    for (auto& r : shifted) {
      r.tap += j0 * lanes;
      r.src += j0 * step;
    }
    switch (std::min<int64_t>(3, kw - j0)) {
      case 1: weight_rows_all<6, 3, 1>(shifted, src, step, g, gstep, blocks, lanes, sums); break;
      case 2: weight_rows_all<6, 3, 2>(shifted, src, step, g, gstep, blocks, lanes, sums); break;
      default: weight_rows_all<6, 3, 3>(shifted, src, step, g, gstep, blocks, lanes, sums); break;
    }
  }
}

// The weight gradient sums over the N * out_h output rows in a fixed number of
// chunks of consecutive rows (a function of the shapes only: at most 64, of at
// least 4 rows), each into its own table of sums; the tables are then added
// in chunk order.
int64_t weight_chunks(int64_t rows, int64_t table_bytes) {
  constexpr int64_t kMaxChunks = 64, kMinRows = 4, kMaxBytes = int64_t{64} << 20;
  return std::min({(rows + kMinRows - 1) / kMinRows, kMaxChunks, std::max<int64_t>(1, kMaxBytes / table_bytes)});
}

template <typename scalar_t>
at::Tensor weight_grad(const conv::DepthwiseBackwardPlan& bp) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int64_t V = Vec<opmath_t>::size();
  const auto& p = bp.p;
  const auto& s = p.s;
  const auto& w = p.w;
  const int64_t lanes = round_up(s.O, V), n_taps = w.kh * w.kw, table = n_taps * lanes;
  const int64_t rows_total = s.N * s.out_h;
  const int64_t chunks = weight_chunks(rows_total, table * int64_t(sizeof(opmath_t)));
  const int64_t chunk_rows = chunks > 0 ? (rows_total + chunks - 1) / chunks : 0;
  std::vector<opmath_t> partial(chunks * table, opmath_t(0));
  const auto x_map = spread_lanes(s.O, p.m, lanes);
  const auto g_map = spread_lanes(s.O, 1, lanes);
  const int64_t slots = std::min((w.kh - 1) * w.dh + 1, s.H);
  // Tap column j reads input column ox * sw - pw + j * dw: inside the image
  // for the output columns [first[j], last[j]).
  std::vector<int64_t> first(w.kw), last(w.kw);
  for (int64_t j = 0; j < w.kw; ++j) {
    first[j] = std::clamp<int64_t>(floor_div(w.pw - j * w.dw + w.sw - 1, w.sw), 0, s.out_w);
    last[j] = std::clamp<int64_t>(floor_div(s.W - 1 + w.pw - j * w.dw, w.sw) + 1, first[j], s.out_w);
  }
  // The output columns where every tap lands inside.
  const int64_t first_all = *std::max_element(first.begin(), first.end());
  const int64_t last_all = *std::min_element(last.begin(), last.end());
  const bool unit = w.sw == 1 && w.dw == 1;
  const int64_t block = weight_block_pixels(w.kw);
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();
  const scalar_t* gout = bp.gout.const_data_ptr<scalar_t>();
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    Rows<scalar_t, opmath_t> x_rows(x, s.H, s.W, s.C, x_map, slots);
    Rows<scalar_t, opmath_t> g_rows(gout, s.out_h, s.out_w, s.O, g_map, 1);
    const int64_t pitch = x_rows.pitch(), gp = g_rows.pitch(), step = w.sw * pitch;
    std::vector<Reach> rows, lead, shifted;
    std::vector<Term> terms;
    std::vector<int64_t> tap_col;  // each term's tap column
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      opmath_t* sums = partial.data() + chunk * table;
      const int64_t r_end = std::min(rows_total, (chunk + 1) * chunk_rows);
      for (int64_t r = chunk * chunk_rows; r < r_end; ++r) {
        const int64_t n = r / s.out_h, oy = r % s.out_h;
        if (r + 1 < r_end) {
          // The next row's output gradient, and the input row that it reads
          // and this one does not.
          const int64_t n1 = (r + 1) / s.out_h, oy1 = (r + 1) % s.out_h;
          const int64_t iy = oy1 * w.sh - w.ph + (w.kh - 1) * w.dh;
          prefetch(gout + (n1 * s.out_h + oy1) * s.out_w * s.O, s.out_w * s.O);
          if (iy >= 0 && iy < s.H) prefetch(x + (n1 * s.H + iy) * s.W * s.C, s.W * s.C);
        }
        input_rows(w, s.H, lanes, n, oy, x_rows, rows);
        const opmath_t* src = x_rows.origin();
        const opmath_t* g = g_rows.origin() + g_rows.row(n, oy);
        // Output columns [d0, d1), where every tap lands inside, by the row
        // kernel at unit stride; the rest by tiles of terms.
        int64_t d0 = 0, d1 = 0;
        if (unit) {
          d0 = first_all;
          d1 = d0 + std::max<int64_t>(0, last_all - first_all) / block * block;
          if (d0 < d1) {
            lead.clear();
            for (const auto& row : rows) lead.push_back({row.tap, row.src + (d0 - w.pw) * pitch});
            weight_rows_kw(lead, w.kw, src, pitch, g + d0 * gp, gp, (d1 - d0) / block, lanes, sums, shifted);
          }
        }
        // Term src: where output column 0 would read (never read itself where
        // that column is outside the image).
        terms.clear();
        tap_col.clear();
        for (const auto& row : rows) {
          for (int64_t j = 0; j < w.kw; ++j) {
            terms.push_back({row.tap + j * lanes, row.src + (j * w.dw - w.pw) * pitch});
            tap_col.push_back(j);
          }
        }
        // Tiles of terms over the columns all of them read, less [d0, d1);
        // each term's other columns one term at a time.
        const int64_t n_terms = terms.size();
        const int64_t tiles = (n_terms + kMaxTile - 1) / kMaxTile, size = tiles > 0 ? (n_terms + tiles - 1) / tiles : 0;
        for (int64_t t0 = 0; t0 < n_terms; t0 += size) {
          const int64_t t1 = std::min(n_terms, t0 + size);
          int64_t lo = 0, hi = s.out_w;
          for (int64_t t = t0; t < t1; ++t) {
            lo = std::max(lo, first[tap_col[t]]);
            hi = std::min(hi, last[tap_col[t]]);
          }
          hi = std::max(lo, hi);
          const int64_t e0 = d0 < d1 ? d0 : lo, e1 = d0 < d1 ? d1 : lo;  // [lo, hi) holds [e0, e1)
          weight_terms(terms.data() + t0, t1 - t0, src + lo * step, step, g + lo * gp, gp, e0 - lo, lanes, sums);
          weight_terms(terms.data() + t0, t1 - t0, src + e1 * step, step, g + e1 * gp, gp, hi - e1, lanes, sums);
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t a = first[tap_col[t]], b = last[tap_col[t]];
            const int64_t left = std::min(b, lo), right = std::max(a, hi);
            weight_terms(terms.data() + t, 1, src + a * step, step, g + a * gp, gp, left - a, lanes, sums);
            weight_terms(terms.data() + t, 1, src + right * step, step, g + right * gp, gp, b - right, lanes, sums);
          }
        }
      }
    }
  });
  // Chunks summed in order, each element on its own: the same sums at any
  // thread count.
  constexpr int64_t V2 = Vec<opmath_t>::size();
  std::vector<opmath_t> total(table, opmath_t(0));
  at::parallel_for(0, table / V2, grain(V2 * std::max<int64_t>(1, chunks)), [&](int64_t begin, int64_t end) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const opmath_t* part = partial.data() + chunk * table;
      for (int64_t e = begin * V2; e < end * V2; e += V2) {
        (Vec<opmath_t>::loadu(total.data() + e) + Vec<opmath_t>::loadu(part + e)).store(total.data() + e);
      }
    }
  });
  at::Tensor grad_weight = at::empty({s.O, n_taps}, p.x.options());
  scalar_t* gw = grad_weight.data_ptr<scalar_t>();
  for (int64_t o = 0; o < s.O; ++o) {
    for (int64_t tap = 0; tap < n_taps; ++tap) gw[o * n_taps + tap] = static_cast<scalar_t>(total[tap * lanes + o]);
  }
  return grad_weight;
}

void check_layout(const conv::DepthwisePlan& p) {
  TORCH_INTERNAL_ASSERT(p.channels_last && p.x.is_contiguous(at::MemoryFormat::ChannelsLast) &&
                        p.weight.is_contiguous() && (!p.bias.defined() || p.bias.is_contiguous()));
}

} // namespace

void depthwise_forward_nhwc(const conv::DepthwisePlan& p) {
  check_layout(p);
  TORCH_INTERNAL_ASSERT(p.out.is_contiguous(at::MemoryFormat::ChannelsLast));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_nhwc_cpu",
                                  [&] { forward<scalar_t>(p); });
}

at::Tensor depthwise_input_grad_nhwc(const conv::DepthwiseBackwardPlan& bp) {
  check_layout(bp.p);
  TORCH_INTERNAL_ASSERT(bp.gout.is_contiguous(at::MemoryFormat::ChannelsLast));
  at::Tensor grad_input = at::empty_like(bp.p.x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bp.p.x.scalar_type(), "depthwise_input_grad_nhwc_cpu",
                                  [&] { input_grad<scalar_t>(bp, grad_input); });
  return grad_input;
}

at::Tensor depthwise_weight_grad_nhwc(const conv::DepthwiseBackwardPlan& bp) {
  check_layout(bp.p);
  TORCH_INTERNAL_ASSERT(bp.gout.is_contiguous(at::MemoryFormat::ChannelsLast));
  return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bp.p.x.scalar_type(),
                                         "depthwise_weight_grad_nhwc_cpu", [&] { return weight_grad<scalar_t>(bp); });
}

} // namespace customops::cpu::CPU_CAPABILITY
