#include "kernels/cuda/upsample/kernels.h"
#include "kernels/upsample.h"
#include "kernels/cuda/common/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include "kernels/cuda/common/device_guard.h"
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace customops::cuda {
namespace {

using upsample::Axis;
using upsample::Plan;

using launch::aligned;
using launch::blocks_for;
using launch::kThreads;
using launch::rows_per_thread;
using launch::Pack;
using launch::widest;
using launch::with_index_type;

// NCHW: each thread writes VEC consecutive outputs of a run of consecutive
// output rows, one store per row. Its VEC column taps are found once, and a
// source row is blended horizontally once per run (kept in registers while
// consecutive output rows read it) rather than once per output row: for a 2x
// upsample that halves the loads and the arithmetic, so the stores set the pace.
template <typename scalar_t, typename index_t, int VEC>
__global__ void __launch_bounds__(kThreads) forward_nchw_kernel(
    const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, index_t total, index_t runs, index_t run_rows,
    index_t IH, index_t IW, index_t OH, index_t OW, Axis<at::opmath_type<scalar_t>> ay,
    Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  const index_t groups = OW / VEC;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t xg = idx % groups, strip = idx / groups;
    const index_t run = strip % runs, plane = strip / runs;
    index_t x0[VEC], x1[VEC];
    opmath_t wx0[VEC], wx1[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) ax.taps(xg * VEC + v, x0[v], x1[v], wx0[v], wx1[v]);
    const scalar_t* image = src + plane * IH * IW;
    opmath_t top[VEC], bottom[VEC];
    index_t have_top = -1, have_bottom = -1;  // source rows held in top / bottom
    // Source row y, horizontally blended, into h: copied from `other` when
    // that holds it already, else loaded.
    auto fetch = [&](index_t y, index_t other_row, const opmath_t(&other)[VEC], opmath_t(&h)[VEC]) {
      if (y == other_row) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) h[v] = other[v];
        return;
      }
      const scalar_t* r = image + y * IW;
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        h[v] = wx0[v] * static_cast<opmath_t>(r[x0[v]]) + wx1[v] * static_cast<opmath_t>(r[x1[v]]);
      }
    };
    const index_t oy_begin = run * run_rows, oy_end = oy_begin + run_rows < OH ? oy_begin + run_rows : OH;
    scalar_t* out = dst + (plane * OH + oy_begin) * OW + xg * VEC;
    for (index_t oy = oy_begin; oy < oy_end; ++oy, out += OW) {
      index_t y0, y1;
      opmath_t wy0, wy1;
      ay.taps(oy, y0, y1, wy0, wy1);
      if (y0 != have_top) {
        fetch(y0, have_bottom, bottom, top);
        have_top = y0;
      }
      if (y1 != have_bottom) {
        fetch(y1, have_top, top, bottom);
        have_bottom = y1;
      }
      Pack<scalar_t, VEC> p;
#pragma unroll
      for (int v = 0; v < VEC; ++v) p.v[v] = static_cast<scalar_t>(wy0 * top[v] + wy1 * bottom[v]);
      *reinterpret_cast<Pack<scalar_t, VEC>*>(out) = p;
    }
  }
}

// channels_last: VEC consecutive channels of one output pixel share its taps.
template <typename scalar_t, typename index_t, int VEC>
__global__ void __launch_bounds__(kThreads) forward_nhwc_kernel(
    const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, index_t total, index_t C, index_t IH,
    index_t IW, index_t OH, index_t OW, Axis<at::opmath_type<scalar_t>> ay, Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, VEC>;
  const index_t groups = C / VEC;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t c = idx % groups * VEC, pix = idx / groups;
    const index_t ox = pix % OW, r = pix / OW;
    const index_t oy = r % OH, n = r / OH;
    index_t y0, y1, x0, x1;
    opmath_t wy0, wy1, wx0, wx1;
    ay.taps(oy, y0, y1, wy0, wy1);
    ax.taps(ox, x0, x1, wx0, wx1);
    const scalar_t* image = src + n * IH * IW * C + c;
    const P a = *reinterpret_cast<const P*>(image + (y0 * IW + x0) * C);
    const P b = *reinterpret_cast<const P*>(image + (y0 * IW + x1) * C);
    const P d = *reinterpret_cast<const P*>(image + (y1 * IW + x0) * C);
    const P e = *reinterpret_cast<const P*>(image + (y1 * IW + x1) * C);
    P out;
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      const opmath_t top = wx0 * static_cast<opmath_t>(a.v[v]) + wx1 * static_cast<opmath_t>(b.v[v]);
      const opmath_t bottom = wx0 * static_cast<opmath_t>(d.v[v]) + wx1 * static_cast<opmath_t>(e.v[v]);
      out.v[v] = static_cast<scalar_t>(wy0 * top + wy1 * bottom);
    }
    *reinterpret_cast<P*>(dst + pix * C + c) = out;
  }
}

// --- backward: gathers, never atomics ---------------------------------------
//
// Input pixel (iy, ix) receives sum_a wy(a) sum_b wx(b) g[a][b] over the
// output rows a and columns b that read it, summed in an order fixed by the
// sizes (each kernel its own), so results are bit-identical run to run.

// NCHW, used where rows are too wide for backward_tile_kernel's shared memory;
// at most MAXX readers per input column (more go through a slower
// loop). Each thread owns one input column of a run of consecutive input
// rows. It walks the output rows that read the run once, in order: blends
// each row's readers of its column (h = sum_b wx(b) g[b]) and adds wy * h to
// the one or two input rows that output row reads. Those rows advance
// monotonically, so two accumulators (rows c and c+1) suffice and row c is
// stored as soon as no later output row can read it. Each gradient row is
// thus loaded once per run instead of once per input row that reads it.
// (Two or four columns a thread, sharing the per-row work, measured no
// faster on an H100.)
constexpr int kBatch = 4;  // rows whose loads are issued together

template <typename scalar_t, typename index_t, int MAXX>
__global__ void __launch_bounds__(kThreads) backward_nchw_kernel(
    const scalar_t* __restrict__ grad, scalar_t* __restrict__ dst, index_t total, index_t runs, index_t run_rows,
    index_t IH, index_t IW, index_t OH, index_t OW, Axis<at::opmath_type<scalar_t>> ay,
    Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t ix = idx % IW, strip = idx / IW;
    const index_t run = strip % runs, plane = strip / runs;
    const index_t x_lo = ax.first_at_least(ix - 1);
    const int nx = static_cast<int>(ax.first_at_least(ix + 1) - x_lo);
    opmath_t wx[MAXX];
#pragma unroll
    for (int b = 0; b < MAXX; ++b) wx[b] = b < nx ? ax.weight(x_lo + b, ix) : opmath_t(0);

    const index_t iy_begin = run * run_rows, iy_end = iy_begin + run_rows < IH ? iy_begin + run_rows : IH;
    const index_t oy_end = ay.first_at_least(iy_end);
    const scalar_t* g = grad + plane * OH * OW + x_lo;
    scalar_t* out = dst + plane * IH * IW + ix;
    index_t c = iy_begin;  // the input row `acc` belongs to; `acc_next` is row c + 1's
    opmath_t acc = 0, acc_next = 0;
    for (index_t oy0 = ay.first_at_least(iy_begin - 1); oy0 < oy_end; oy0 += kBatch) {
      scalar_t v[kBatch][MAXX];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const scalar_t* r = g + (oy0 + u) * OW;
#pragma unroll
        for (int b = 0; b < MAXX; ++b) v[u][b] = b < nx && oy0 + u < oy_end ? r[b] : scalar_t(0);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const index_t oy = oy0 + u;
        if (oy >= oy_end) break;
        opmath_t h = 0;
#pragma unroll
        for (int b = 0; b < MAXX; ++b) h += wx[b] * static_cast<opmath_t>(v[u][b]);
        for (int b = MAXX; b < nx; ++b) h += ax.weight(x_lo + b, ix) * static_cast<opmath_t>(g[oy * OW + b]);
        index_t y0, y1;
        opmath_t wy0, wy1;
        ay.taps(oy, y0, y1, wy0, wy1);
        for (; c < y0; ++c) {  // no later output row reads row c
          out[c * IW] = static_cast<scalar_t>(acc);
          acc = acc_next;
          acc_next = 0;
        }
        if (y0 == c) {
          acc += wy0 * h;
          if (y1 == c) {
            acc += wy1 * h;
          } else {
            acc_next += wy1 * h;
          }
        } else if (y1 == c) {  // y0 == c - 1: the row above this run
          acc += wy1 * h;
        }
      }
    }
    for (; c < iy_end; ++c) {
      out[c * IW] = static_cast<scalar_t>(acc);
      acc = acc_next;
      acc_next = 0;
    }
  }
}

// One output row's taps, as Axis::taps gives them.
template <typename opmath_t, typename index_t>
struct RowTaps {
  index_t y0, y1;
  opmath_t w0, w1;
};

// backward_tile_kernel's shared memory, in 16-byte-aligned parts: the vertical
// sums (tile_rows x OW), the first output row reading each of the tile's rows
// (and the rows either side), and the taps of up to table_rows output rows.
struct TileLayout {
  int64_t sums, firsts, table, bytes;
  template <typename opmath_t, typename index_t>
  static C10_HOST_DEVICE TileLayout of(int64_t tile_rows, int64_t OW, int64_t table_rows) {
    auto up16 = [](int64_t n) { return (n + 15) / 16 * 16; };
    TileLayout l{};
    l.sums = 0;
    l.firsts = up16(tile_rows * OW * int64_t(sizeof(opmath_t)));
    l.table = l.firsts + up16((tile_rows + 2) * int64_t(sizeof(index_t)));
    l.bytes = l.table + table_rows * int64_t(sizeof(RowTaps<opmath_t, index_t>));
    return l;
  }
};

// NCHW, a tile of input rows of one plane a block, in two passes through
// shared memory. Vertical: each thread walks the output rows that read a run
// of the tile's input rows, VEC gradient columns at a time (one 16-byte load;
// 8-byte in half types), with the two-accumulator scheme above, leaving
// t[iy][ox] = sum_a wy(a) g[a][ox] in shared memory. Horizontal:
// grad_in[iy][ix] = sum_b wx(b) t[iy][x_lo + b], each thread finding its
// column's readers once. The rows' taps are computed once a tile, into shared
// memory. Per gradient element that is a quarter of a load and two FMAs, where
// backward_nchw_kernel issued two loads and two FMAs and its row bookkeeping
// for each of the (up to) 4 input columns that read it.
//
// Resident blocks the launch bounds ask for: 6 leave 40 registers a thread,
// enough for float16 (24 bytes of stack, as float32 has with 48) but not for
// bfloat16's conversions (56 bytes of stack): with 5 blocks bfloat16 ran
// 10-30% faster, float16 3-5% slower (H100, 2x and 4x upsampling).
template <typename scalar_t, typename index_t, int VEC, int MAXX>
__global__ void __launch_bounds__(kThreads, std::is_same_v<scalar_t, at::Half> ? 6 : 5) backward_tile_kernel(
    const scalar_t* __restrict__ grad, scalar_t* __restrict__ dst, index_t tiles, index_t tile_rows, index_t subrun,
    index_t table_rows, index_t IH, index_t IW, index_t OH, index_t OW, Axis<at::opmath_type<scalar_t>> ay,
    Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, VEC>;
  extern __shared__ __align__(16) unsigned char shared[];
  const auto layout = TileLayout::of<opmath_t, index_t>(tile_rows, OW, table_rows);
  opmath_t* t = reinterpret_cast<opmath_t*>(shared + layout.sums);
  index_t* firsts = reinterpret_cast<index_t*>(shared + layout.firsts);
  auto* table = reinterpret_cast<RowTaps<opmath_t, index_t>*>(shared + layout.table);
  const index_t tiles_per_plane = (IH + tile_rows - 1) / tile_rows, groups = OW / VEC;
  // Horizontal pass: thread (tx, ty) takes columns tx, tx + cols, ... and rows ty, ty + lanes, ...
  const index_t cols = IW < index_t(blockDim.x) ? IW : index_t(blockDim.x), lanes = blockDim.x / cols;
  const index_t tx = threadIdx.x % cols, ty = threadIdx.x / cols;
  for (index_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const index_t plane = tile / tiles_per_plane, iy_a = tile % tiles_per_plane * tile_rows;
    const index_t iy_b = min(IH, iy_a + tile_rows);
    // firsts[k]: the first output row whose y0 is at least iy_a - 1 + k.
    for (index_t k = threadIdx.x; k < iy_b - iy_a + 2; k += blockDim.x) firsts[k] = ay.first_at_least(iy_a - 1 + k);
    __syncthreads();
    const index_t oy_lo = firsts[0], tabled = min(table_rows, firsts[iy_b - iy_a + 1] - oy_lo);
    for (index_t k = threadIdx.x; k < tabled; k += blockDim.x) {
      RowTaps<opmath_t, index_t> r;
      ay.taps(oy_lo + k, r.y0, r.y1, r.w0, r.w1);
      table[k] = r;
    }
    __syncthreads();
    const index_t subruns = (iy_b - iy_a + subrun - 1) / subrun;
    const scalar_t* g = grad + plane * OH * OW;
    for (index_t item = threadIdx.x; item < groups * subruns; item += blockDim.x) {
      const index_t xg = item % groups;
      const index_t iy_begin = iy_a + item / groups * subrun;
      const index_t iy_end = min(iy_b, iy_begin + subrun), oy_end = firsts[iy_end - iy_a + 1];
      opmath_t* trow = t + (iy_begin - iy_a) * OW + xg * VEC;
      opmath_t acc[VEC], acc_next[VEC];
#pragma unroll
      for (int v = 0; v < VEC; ++v) acc[v] = acc_next[v] = opmath_t(0);
      index_t c = iy_begin;  // the input row `acc` belongs to; `acc_next` is row c + 1's
      auto finish_row = [&] {
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          trow[v] = acc[v];
          acc[v] = acc_next[v];
          acc_next[v] = opmath_t(0);
        }
        trow += OW;
        ++c;
      };
      for (index_t oy0 = firsts[iy_begin - iy_a]; oy0 < oy_end; oy0 += kBatch) {
        P rows[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          if (oy0 + u < oy_end) rows[u] = *reinterpret_cast<const P*>(g + (oy0 + u) * OW + xg * VEC);
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const index_t oy = oy0 + u;
          if (oy >= oy_end) break;
          RowTaps<opmath_t, index_t> r;
          if (oy - oy_lo < tabled) {
            r = table[oy - oy_lo];
          } else {  // beyond the table (sized on the host, whose rounding may differ)
            ay.taps(oy, r.y0, r.y1, r.w0, r.w1);
          }
          while (c < r.y0) finish_row();  // no later output row reads row c
          // Branches, not zero weights: 0 * inf would put a NaN in a row that never read it.
          opmath_t x[VEC];
#pragma unroll
          for (int v = 0; v < VEC; ++v) x[v] = static_cast<opmath_t>(rows[u].v[v]);
          if (r.y0 == c) {
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc[v] += r.w0 * x[v];
            if (r.y1 == c) {
#pragma unroll
              for (int v = 0; v < VEC; ++v) acc[v] += r.w1 * x[v];
            } else {
#pragma unroll
              for (int v = 0; v < VEC; ++v) acc_next[v] += r.w1 * x[v];
            }
          } else if (r.y1 == c) {  // y0 == c - 1: the row above this run
#pragma unroll
            for (int v = 0; v < VEC; ++v) acc[v] += r.w1 * x[v];
          }
        }
      }
      while (c < iy_end) finish_row();
    }
    __syncthreads();
    if (ty < lanes) {
      for (index_t ix = tx; ix < IW; ix += cols) {
        const index_t x_lo = ax.first_at_least(ix - 1);
        const int nx = static_cast<int>(ax.first_at_least(ix + 1) - x_lo);
        opmath_t wx[MAXX];
#pragma unroll
        for (int b = 0; b < MAXX; ++b) wx[b] = b < nx ? ax.weight(x_lo + b, ix) : opmath_t(0);
#pragma unroll 4
        for (index_t r = ty; r < iy_b - iy_a; r += lanes) {
          const opmath_t* row = t + r * OW + x_lo;
          opmath_t sum = 0;
#pragma unroll
          for (int b = 0; b < MAXX; ++b) {
            if (b < nx) sum += wx[b] * row[b];
          }
          for (int b = MAXX; b < nx; ++b) sum += ax.weight(x_lo + b, ix) * row[b];
          dst[(plane * IH + iy_a + r) * IW + ix] = static_cast<scalar_t>(sum);
        }
      }
    }
    __syncthreads();  // before the next tile overwrites the shared memory
  }
}

// Any ratio and either layout: each thread finds its own readers. Used for
// channels_last and for widening by more than about 3x, where an input column
// has more than 8 readers.
template <typename scalar_t, typename index_t, bool kChannelsLast>
__global__ void __launch_bounds__(kThreads) backward_any_kernel(
    const scalar_t* __restrict__ grad, scalar_t* __restrict__ dst, index_t total, index_t C, index_t IH,
    index_t IW, index_t OH, index_t OW, Axis<at::opmath_type<scalar_t>> ay, Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    index_t ix, iy, base, row_stride, col_stride;
    if (kChannelsLast) {
      const index_t c = idx % C, pix = idx / C;
      ix = pix % IW;
      const index_t r = pix / IW;
      iy = r % IH;
      base = r / IH * OH * OW * C + c;
      row_stride = OW * C;
      col_stride = C;
    } else {
      ix = idx % IW;
      const index_t r = idx / IW;
      iy = r % IH;
      base = r / IH * OH * OW;
      row_stride = OW;
      col_stride = 1;
    }
    const index_t y_lo = ay.first_at_least(iy - 1), y_hi = ay.first_at_least(iy + 1);
    const index_t x_lo = ax.first_at_least(ix - 1), x_hi = ax.first_at_least(ix + 1);
    opmath_t acc = 0;
    for (index_t oy = y_lo; oy < y_hi; ++oy) {
      const scalar_t* row = grad + base + oy * row_stride;
      opmath_t part = 0;
      for (index_t ox = x_lo; ox < x_hi; ++ox) {
        part += ax.weight(ox, ix) * static_cast<opmath_t>(row[ox * col_stride]);
      }
      acc += ay.weight(oy, iy) * part;
    }
    dst[idx] = static_cast<scalar_t>(acc);
  }
}

// Most outputs that read one input index along an axis: those whose i0 is
// i - 1 or i. Counted exactly, in one pass over the outputs (runs of equal
// i0), when that is cheap; otherwise bounded: sources in [i-1, i+1) plus those
// clamped to 0. The count skips the two indices at each end, where clamping
// adds readers (half_pixel's input 1 has 5 at 2x, one of weight 0): the
// kernel takes a column's extra readers in a slower loop, and sizing its
// registers for the bulk of the columns makes the 2x backward twice as fast.
template <typename opmath_t>
int64_t max_readers(const Axis<opmath_t>& a) {
  if (a.scale == opmath_t(0)) return a.out;
  if (a.out > (int64_t(1) << 16)) {
    return std::min<int64_t>(a.out, static_cast<int64_t>(std::floor(2.5 / static_cast<double>(a.scale))) + 2);
  }
  constexpr int64_t kEdge = 2;
  const bool skip = a.in > 2 * kEdge + 1;
  int64_t most = 0, value = -1, count = 0, previous = 0;  // previous: outputs with i0 == value - 1
  for (int64_t o = 0; o <= a.out; ++o) {
    const int64_t i0 = o < a.out ? a.first_tap(o) : std::numeric_limits<int64_t>::max();
    if (i0 == value) {
      ++count;
      continue;
    }
    if (!skip || (value >= kEdge && value < a.in - kEdge)) most = std::max(most, previous + count);
    previous = i0 == value + 1 ? count : 0;
    value = i0;
    count = 1;
  }
  return most;
}

// Shared memory for backward_tile_kernel's vertical sums of a tile, and the
// most output rows whose taps it tabulates (a table of up to 12 KiB). For
// float32, 24 KiB of sums beat 16 and 32 on an H100 (8-row tiles re-read too
// many boundary rows, 32 KiB ones leave too few blocks resident); half types,
// whose gradient rows are half as wide in memory, ran 5-25% faster with 32 KiB
// (2x: 64x64 to 512x512 inputs; 4x: 32x32).
template <typename scalar_t>
constexpr int64_t tile_bytes() {
  return sizeof(scalar_t) == 2 ? 32 * 1024 : 24 * 1024;
}
constexpr int64_t kTileMaxRows = 256;
constexpr int64_t kTableRows = 384;
// All of it within the 48 KiB a kernel may use without opting in.
static_assert(tile_bytes<at::Half>() + (kTileMaxRows + 2) * 8 + 2 * 16 +
                  kTableRows * sizeof(RowTaps<float, int64_t>) <=
              48 * 1024);
static_assert(tile_bytes<double>() + (kTileMaxRows + 2) * 8 + 2 * 16 +
                  kTableRows * sizeof(RowTaps<double, int64_t>) <=
              48 * 1024);

// These kernels reach about 1024 resident threads per multiprocessor.
constexpr int64_t kResidentThreads = 1024;

template <typename scalar_t>
void forward(const Plan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  const auto ay = Axis<opmath_t>::make(p.mode, p.in_h, p.out_h);
  const auto ax = Axis<opmath_t>::make(p.mode, p.in_w, p.out_w);
  const scalar_t* src = p.input.const_data_ptr<scalar_t>();
  scalar_t* dst = p.output.data_ptr<scalar_t>();
  const auto stream = at::cuda::getCurrentCUDAStream();
  constexpr int kVec = widest<scalar_t>();
  with_index_type(std::max(p.input.numel(), p.output.numel()), [&](auto index) {
    using index_t = decltype(index);
    if (p.channels_last) {
      const bool vec = p.C % kVec == 0 && aligned(src, sizeof(scalar_t) * kVec);
      const int64_t n = p.output.numel(), total = vec ? n / kVec : n;
      auto kernel = vec ? forward_nhwc_kernel<scalar_t, index_t, kVec> : forward_nhwc_kernel<scalar_t, index_t, 1>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, dst, total, p.C, p.in_h, p.in_w, p.out_h, p.out_w,
                                                         ay, ax);
    } else {
      const bool vec = p.out_w % kVec == 0;
      const int64_t planes = p.N * p.C, groups = vec ? p.out_w / kVec : p.out_w;
      const int64_t rows = rows_per_thread(planes * groups, p.out_h, 8, kResidentThreads);
      const int64_t runs = (p.out_h + rows - 1) / rows, total = planes * runs * groups;
      auto kernel = vec ? forward_nchw_kernel<scalar_t, index_t, kVec> : forward_nchw_kernel<scalar_t, index_t, 1>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, dst, total, runs, rows, p.in_h, p.in_w, p.out_h,
                                                         p.out_w, ay, ax);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

template <typename scalar_t>
void backward(const Plan& p) {
  using opmath_t = at::opmath_type<scalar_t>;
  // The plan's in_*/out_* are the forward's sizes: grad_in's and grad_out's.
  const auto ay = Axis<opmath_t>::make(p.mode, p.in_h, p.out_h);
  const auto ax = Axis<opmath_t>::make(p.mode, p.in_w, p.out_w);
  const scalar_t* grad = p.input.const_data_ptr<scalar_t>();
  scalar_t* dst = p.output.data_ptr<scalar_t>();
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t IH = p.in_h, IW = p.in_w, OH = p.out_h, OW = p.out_w;
  with_index_type(std::max(p.input.numel(), p.output.numel()), [&](auto index) {
    using index_t = decltype(index);
    const int64_t readers = p.channels_last ? 0 : max_readers(ax);
    const int64_t planes = p.N * p.C;
    const int64_t tile_rows = std::min<int64_t>({IH, kTileMaxRows, tile_bytes<scalar_t>() / (OW * int64_t(sizeof(opmath_t)))});
    if (p.channels_last || readers > 8) {
      const int64_t total = p.output.numel();
      auto kernel = p.channels_last ? backward_any_kernel<scalar_t, index_t, true>
                                    : backward_any_kernel<scalar_t, index_t, false>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(grad, dst, total, p.C, IH, IW, OH, OW, ay, ax);
    } else if (tile_rows >= std::min<int64_t>(IH, 8)) {
      // 8-byte loads in half types: with 16, the accumulators cost the
      // occupancy that the launch bounds ask for (measured on an H100).
      constexpr int kVec = sizeof(scalar_t) == 2 ? 4 : widest<scalar_t>();
      const bool vec = OW % kVec == 0 && aligned(grad, sizeof(scalar_t) * kVec);
      // Rows a thread walks in the vertical pass: enough of them that the
      // loads of a run batch up, few enough that every thread has a run.
      const int64_t groups = vec ? OW / kVec : OW;
      const int64_t subrun = std::clamp<int64_t>(tile_rows * groups / kThreads, 2, 8);
      // Readers beyond MAXX (the columns at the edges) take the kernel's slower loop.
      auto pick = [&](auto maxx) {
        constexpr int M = decltype(maxx)::value;
        return vec ? backward_tile_kernel<scalar_t, index_t, kVec, M> : backward_tile_kernel<scalar_t, index_t, 1, M>;
      };
      auto kernel = readers <= 2   ? pick(std::integral_constant<int, 2>{})
                    : readers <= 4 ? pick(std::integral_constant<int, 4>{})
                                   : pick(std::integral_constant<int, 8>{});
      const int64_t tiles = planes * ((IH + tile_rows - 1) / tile_rows);
      // Output rows reading a tile, at most (any beyond work out their taps
      // themselves): 4 spare for rounding that differs from the device's.
      int64_t table_rows = 0;
      for (int64_t iy = 0; iy < IH; iy += tile_rows) {
        table_rows = std::max(table_rows, ay.first_at_least(std::min(IH, iy + tile_rows)) - ay.first_at_least(iy - 1));
      }
      table_rows = std::min<int64_t>(table_rows + 4, kTableRows);
      const auto layout = TileLayout::of<opmath_t, index_t>(tile_rows, OW, table_rows);
      kernel<<<unsigned(std::min<int64_t>(tiles, int64_t(1) << 30)), kThreads, size_t(layout.bytes), stream>>>(
          grad, dst, tiles, tile_rows, subrun, table_rows, IH, IW, OH, OW, ay, ax);
    } else {  // rows too wide for a tile of 8 in shared memory
      // A thread's set-up (finding its column's readers) costs about as much
      // as a dozen rows: long runs amortise it.
      const int64_t rows = rows_per_thread(planes * IW, IH, 32, kResidentThreads);
      const int64_t runs = (IH + rows - 1) / rows, total = planes * runs * IW;
      auto kernel = readers <= 2   ? backward_nchw_kernel<scalar_t, index_t, 2>
                    : readers <= 4 ? backward_nchw_kernel<scalar_t, index_t, 4>
                                   : backward_nchw_kernel<scalar_t, index_t, 8>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(grad, dst, total, runs, rows, IH, IW, OH, OW, ay, ax);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace

void upsample_forward_kernels(const upsample::Plan& plan) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.input.scalar_type(), "upsample_bilinear2d_cuda",
                                  [&] { forward<scalar_t>(plan); });
}

void upsample_backward_kernels(const upsample::Plan& plan) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.input.scalar_type(),
                                  "upsample_bilinear2d_backward_cuda", [&] { backward<scalar_t>(plan); });
}

} // namespace customops::cuda
