// depthwise_conv2d on CPU for channels_last tensors: the weight gradient
// (nhwc_gather.h's first comment describes the NHWC kernels; nhwc_common.h holds
// what the two files share).
//
// The weight gradient, at unit column stride and dilation, holds the sums of
// a few tap rows' taps and a block of output-gradient vectors in registers and
// loads each input vector once for all the sums it feeds; the pixels near the
// border, and other strides, go as tiles of up to 12 taps' sums over the
// pixels all of them read, the rest tap by tap. Its sums run over fixed chunks
// of rows, each into a table of its own, added in a fixed order at the end:
// the same result at any thread count.
#include "kernels/cpu/depthwise_conv2d/nhwc.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "kernels/cpu/common/parallel.h"
#include "kernels/cpu/depthwise_conv2d/nhwc_common.h"

namespace customops::cpu::CPU_CAPABILITY {

using namespace depthwise_nhwc;  // nhwc_common.h: what this file shares with nhwc_gather.h

namespace {

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

} // namespace

at::Tensor depthwise_weight_grad_nhwc(const conv::DepthwiseBackwardPlan& bp) {
  check_layout(bp.p);
  TORCH_INTERNAL_ASSERT(bp.gout.is_contiguous(at::MemoryFormat::ChannelsLast));
  return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, bp.p.x.scalar_type(),
                                         "depthwise_weight_grad_nhwc_cpu", [&] { return weight_grad<scalar_t>(bp); });
}

} // namespace customops::cpu::CPU_CAPABILITY
