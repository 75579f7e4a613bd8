// depthwise_conv2d on CPU for channels_last tensors, natively in NHWC: the
// forward and the input gradient here (instantiated per dtype by nhwc.cpp and
// nhwc_half.cpp, two translation units so that a parallel build compiles them
// at once), the weight gradient in nhwc_wgrad.cpp, what they share in
// nhwc_common.h. A vector holds V consecutive channels of
// one pixel, which is how NHWC already lies in memory, so the kernels read the
// tensors in place: no transpose and no padded copy. Borders are handled by
// clamping each output pixel's taps to those that land inside the image.
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
// The weight gradient: nhwc_wgrad.cpp.
//
// Where vectors cannot read a tensor in place (half types, which compute in
// float; a channel count that is not a multiple of V; a channel multiplier
// m > 1, where output channel o reads input channel o / m), its rows are staged
// once into opmath rows of whole vectors, in a ring that holds the rows one
// output row reads, so each row is converted once per thread.
#pragma once

#include "kernels/cpu/depthwise_conv2d/nhwc.h"

#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

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

#include "kernels/cpu/common/parallel.h"
#include "kernels/core/vec_store.h"
#include "kernels/cpu/depthwise_conv2d/nhwc_common.h"

namespace customops::cpu::CPU_CAPABILITY {

using namespace depthwise_nhwc;  // nhwc_common.h: what this file shares with nhwc_wgrad.cpp

// Internal to each file that includes this one (nhwc.cpp, nhwc_half.cpp).
namespace {

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

} // namespace

} // namespace customops::cpu::CPU_CAPABILITY
