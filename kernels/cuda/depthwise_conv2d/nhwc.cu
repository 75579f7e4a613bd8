// depthwise_conv2d on CUDA, channels_last (NHWC in memory): the forward and
// the input gradient; the weight gradient is nhwc_wgrad.cu's, and what the two
// files share is in nhwc_common.cuh.
//
// In NHWC the channels of a pixel are contiguous. Every kernel here and in
// nhwc_wgrad.cu stages its input into shared memory in the same pixel-major
// layout (a block's share of each pixel's channels, zeros outside the image),
// with cp.async where the words are aligned, so that the next rows load while
// the current ones are used. A thread owns V lanes (4, or 2 doubles) and a
// strip of kS neighbouring outputs of a row: for each kernel row it slides over
// the kS + TJ - 1 staged columns of a block of TJ taps, so each staged value it
// reads feeds up to TJ taps. Tap blocks are the kernel width for 1, 3, 5, 7 and
// 4 otherwise, the missing taps skipped, never multiplied as zeros (0 * inf
// would be a NaN).
//
// 3x3 windows at row stride 1 or 2 first try the column kernels
// (nhwc_columns.cu: registers, no staging), faster there, for the forward and
// the unit-stride input gradient in every dtype (half types from 64 channels)
// and for the weight gradient. Half types' larger windows up to 9x9 at unit
// stride first try the tensor-core kernel (nhwc_mma.cu) for those two
// correlations.
//
// Forward (output channel o reads input channel o / m) and the input gradient
// at unit stride with m == 1 (the same correlation over grad_out with flipped
// taps and padding (k-1)*d - p) stream rows: a block owns a share of the
// channels (all of a pixel's up to 512 bytes), a tile of columns and a band of
// output rows, and keeps the input rows its steps read in a ring (row_corr_kernel).
// Other input gradients, and windows too large for shared memory, take direct
// kernels (one thread per pixel and V lanes, a fixed order of taps).
//
// Weight gradient: nhwc_wgrad.cu.
#include "kernels/cuda/depthwise_conv2d/nhwc.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/depthwise_conv2d/common.cuh"
#include "kernels/cuda/depthwise_conv2d/nhwc_columns.cuh"
#include "kernels/cuda/depthwise_conv2d/nhwc_common.cuh"
#include "kernels/cuda/depthwise_conv2d/nhwc_mma.cuh"

namespace customops::cuda::depthwise_nhwc {
namespace {

// ---------------------------------------------------------------------------
// Correlation (forward, and the unit-stride input gradient), streamed by rows.
//
// A block owns `pl` lanes (a whole pixel's channels, or an even share of them
// up to 512 bytes: the staged runs are then contiguous in memory), tw output
// columns and a band of output rows. It keeps the input rows its steps read in
// a ring of `cap` shared-memory rows and computes `rs` output rows a step;
// each step stages only the rows the step `depth` ahead adds (cp.async, so they
// load while this step computes). Every input row of the band is thus staged
// once. (Blocks that owned 32 bytes of each pixel, each reading a sector of
// every line it touched, moved their tiles at a third of the copy bandwidth.)

// One input row into a ring slot: cols pixels from column x0 on, lanes
// c0 .. c0 + pl of each; zeros outside the image and past the last channel
// (row == nullptr: the row is outside the image). Thread's first word
// (p0, u0), then steps of (dp, du) words, without divisions.
template <typename scalar_t, typename Word>
__device__ __forceinline__ void stage_row_words(scalar_t* __restrict__ dst, const scalar_t* __restrict__ row,
                                                const scalar_t* __restrict__ any, int64_t w, int64_t channels,
                                                int64_t c0, int64_t x0, int cols, int pl, int wpp, int p0, int u0,
                                                int dp, int du) {
  constexpr int kPer = sizeof(Word) / sizeof(scalar_t);
  int p = p0, u = u0;
  while (p < cols) {
    const int64_t x = x0 + p, ch = c0 + int64_t(u) * kPer;
    const bool ok = row != nullptr && x >= 0 && x < w && ch < channels;
    copy_word(reinterpret_cast<Word*>(dst + p * pl + u * kPer), ok ? row + x * channels + ch : any, ok);
    u += du;
    p += dp;
    if (u >= wpp) {
      u -= wpp;
      ++p;
    }
  }
}

// Lane by lane: lane l holds channel (c0 + l) / m, for c0 + l < lanes_end.
template <typename scalar_t>
__device__ __forceinline__ void stage_row_lanes(scalar_t* __restrict__ dst, const scalar_t* __restrict__ row,
                                                int64_t w, int64_t channels, int64_t c0, int64_t lanes_end, int m,
                                                int64_t x0, int cols, int pl, int p0, int u0, int dp, int du) {
  int p = p0, u = u0;
  while (p < cols) {
    const int64_t x = x0 + p;
    const bool ok = row != nullptr && x >= 0 && x < w && c0 + u < lanes_end;
    dst[p * pl + u] = ok ? row[x * channels + (c0 + u) / m] : scalar_t(0);
    u += du;
    p += dp;
    if (u >= pl) {
      u -= pl;
      ++p;
    }
  }
}

template <typename scalar_t>
__device__ __forceinline__ void stage_row(const Source<scalar_t>& s, scalar_t* dst, const scalar_t* row, int64_t c0,
                                          int64_t lanes_end, int64_t x0, int cols, int pl, int wpp, int p0, int u0,
                                          int dp, int du) {
  switch (s.word) {
    case 16:
      stage_row_words<scalar_t, uint4>(dst, row, s.img, s.w, s.channels, c0, x0, cols, pl, wpp, p0, u0, dp, du);
      break;
    case 8:
      stage_row_words<scalar_t, uint2>(dst, row, s.img, s.w, s.channels, c0, x0, cols, pl, wpp, p0, u0, dp, du);
      break;
    case 4:
      if constexpr (sizeof(scalar_t) <= 4) {
        stage_row_words<scalar_t, uint32_t>(dst, row, s.img, s.w, s.channels, c0, x0, cols, pl, wpp, p0, u0, dp,
                                            du);
      }
      break;
    default:
      stage_row_lanes(dst, row, s.w, s.channels, c0, lanes_end, s.m, x0, cols, pl, p0, u0, dp, du);
  }
}

struct RowTiling {
  int pl, chunks;             // lanes a block owns; blocks across the channels
  int strips_x, tw, tiles_x;  // strips of kS outputs a row; tile width; tiles across the row
  int rs, band, bands;        // output rows a step; a band (a block's rows); bands down the plane
  int span, depth, cap;       // input rows a step reads; steps staged ahead; ring rows
  int in_cols, kwp;           // staged columns; kernel width padded to TJ
  int slot_elems, w_bytes, wpp, threads;
  size_t smem;
};

// Blocks of at most kRowThreads threads, two a multiprocessor: the compiler
// keeps a thread to 96 registers (ten warps of 96 fit each scheduler's
// quarter of the register file twice). At 107 registers one 9-warp block ran
// per multiprocessor and the 3x3 forward issued an instruction every 4.7
// cycles a warp, at a quarter of the copy bandwidth.
constexpr int kRowThreads = 320;

// Thread (cg, sx, rr): lanes cg*V.., outputs sx*kS.. of output row rr of each
// step. UNIT: unit stride and dilation along rows, where a thread's kS outputs
// share their staged columns and each staged value feeds up to TJ taps. Image
// coordinates fit in 32 bits (the plan's sizes do); offsets into tensors are
// 64-bit.
template <typename scalar_t, int TJ, bool UNIT>
__global__ void __launch_bounds__(kRowThreads, 2)
    row_corr_kernel(Source<scalar_t> src, const scalar_t* __restrict__ weight, const scalar_t* __restrict__ bias,
                    scalar_t* __restrict__ dst, Geometry g, RowTiling t) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = thread_lanes<scalar_t>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  opmath_t* s_w = reinterpret_cast<opmath_t*>(smem_raw);  // taps [kh][kwp][pl]
  scalar_t* s_ring = reinterpret_cast<scalar_t*>(smem_raw + t.w_bytes);
  const int tid = threadIdx.x, threads = blockDim.x, cgs = t.pl / V;
  const int cg = tid % cgs, sx = tid / cgs % t.strips_x, rr = tid / (cgs * t.strips_x);
  int64_t b = blockIdx.x;
  const int o0 = static_cast<int>(b % t.chunks) * t.pl, o = o0 + cg * V;
  b /= t.chunks;
  const int tx = static_cast<int>(b % t.tiles_x);
  b /= t.tiles_x;
  const int oy_begin = static_cast<int>(b % t.bands) * t.band;
  const int64_t n = b / t.bands;
  const int dst_h = int(g.dst_h), dst_w = int(g.dst_w), dst_c = int(g.dst_c);
  const int oy_end = std::min(dst_h, oy_begin + t.band);
  const int steps = (oy_end - oy_begin + t.rs - 1) / t.rs;
  const int x0 = tx * t.tw * g.sw - g.pw, a0 = oy_begin * g.sh - g.ph, advance = t.rs * g.sh;
  const int p0 = tid / t.wpp, u0 = tid % t.wpp, dp = threads / t.wpp, du = threads % t.wpp;
  const int64_t row_elems = src.w * src.channels;
  const scalar_t* img = src.img + n * src.h * row_elems;

  // Step s reads input rows a0 + s*advance .. + span; it stages those that
  // the step before did not read. Row a0 + r lives in slot r % cap.
  auto stage_step = [&](int s) {
    const int a = a0 + s * advance, from = s == 0 ? a : std::max(a, a - advance + t.span);
    int slot = (from - a0) % t.cap;
    for (int y = from; y < a + t.span; ++y) {
      const scalar_t* row = y >= 0 && y < src.h ? img + y * row_elems : nullptr;
      stage_row(src, s_ring + slot * t.slot_elems, row, o0, dst_c, x0, t.in_cols, t.pl, t.wpp, p0, u0, dp, du);
      if (++slot == t.cap) slot = 0;
    }
  };
  stage_step(0);
  cp_async_commit();
  if (t.depth == 2) {
    if (steps > 1) stage_step(1);
    cp_async_commit();
  }

  // Taps, read in memory order while the rows load.
  const int taps = g.kh * g.kw;
  for (int k = tid; k < t.pl * taps; k += threads) {
    const int lane = k / taps, tap = k - lane * taps, i = tap / g.kw, j = tap - i * g.kw;
    const int64_t oc = o0 + lane;
    s_w[(i * t.kwp + j) * t.pl + lane] =
        oc < dst_c ? static_cast<opmath_t>(weight[oc * taps + (g.flipped ? taps - 1 - tap : tap)]) : opmath_t(0);
  }
  const int pad = t.kwp - g.kw;
  for (int k = tid; k < g.kh * pad * t.pl; k += threads) {
    const int lane = k % t.pl, ij = k / t.pl;
    s_w[((ij / pad) * t.kwp + g.kw + ij % pad) * t.pl + lane] = 0;
  }
  opmath_t bv[V];
#pragma unroll
  for (int k = 0; k < V; ++k) bv[k] = bias != nullptr && o + k < dst_c ? static_cast<opmath_t>(bias[o + k]) : 0;
  const int live_lanes = std::clamp(dst_c - o, 0, V);
  const bool vec_store = dst_c % V == 0;
  const int ox = tx * t.tw + sx * kS;
  const bool computes = rr < t.rs && ox < dst_w && live_lanes > 0;
  const scalar_t* thread_ring = s_ring + (sx * kS * g.sw) * t.pl + cg * V;
  const opmath_t* thread_taps = s_w + cg * V;
  int first = (rr * g.sh) % t.cap;  // slot of the thread's first input row at step s

  for (int s = 0; s < steps; ++s) {
    if (t.depth == 2) {
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // step s's rows (and the taps) are in; step s-1 is done with its rows
    if (s + t.depth < steps) stage_step(s + t.depth);
    cp_async_commit();

    const int oy = oy_begin + s * t.rs + rr;
    if (computes && oy < oy_end) {
      opmath_t acc[kS][V];
#pragma unroll
      for (int q = 0; q < kS; ++q) {
#pragma unroll
        for (int v = 0; v < V; ++v) acc[q][v] = 0;
      }
      int slot = first;
      for (int i = 0; i < g.kh; ++i) {
        const scalar_t* row = thread_ring + slot * t.slot_elems;
        const opmath_t* wrow = thread_taps + i * t.kwp * t.pl;
        slot += g.dh;
        if (slot >= t.cap) slot -= t.cap;
        for (int jb = 0; jb < t.kwp; jb += TJ) {
          opmath_t wv[TJ][V];
          bool ok[TJ];
#pragma unroll
          for (int q = 0; q < TJ; ++q) {
            load_lanes<opmath_t, V>(wrow + (jb + q) * t.pl, wv[q]);
            ok[q] = jb + q < g.kw;
          }
          if constexpr (UNIT) {
#pragma unroll
            for (int c = 0; c < kS + TJ - 1; ++c) {
              opmath_t xv[V];
              load_lanes<scalar_t, V>(row + (jb + c) * t.pl, xv);
#pragma unroll
              for (int q = 0; q < kS; ++q) {
                const int j = c - q;
                if (j >= 0 && j < TJ && ok[j]) {
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[q][v] += wv[j][v] * xv[v];
                }
              }
            }
          } else {
#pragma unroll
            for (int q = 0; q < kS; ++q) {
#pragma unroll
              for (int j = 0; j < TJ; ++j) {
                if (ok[j]) {
                  opmath_t xv[V];
                  load_lanes<scalar_t, V>(row + (q * g.sw + (jb + j) * g.dw) * t.pl, xv);
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[q][v] += wv[j][v] * xv[v];
                }
              }
            }
          }
        }
      }
      scalar_t* out = dst + ((n * dst_h + oy) * dst_w + ox) * g.dst_c + o;
#pragma unroll
      for (int q = 0; q < kS; ++q) {
        if (ox + q < dst_w) store_lanes<scalar_t, V>(out + q * g.dst_c, acc[q], bv, live_lanes, vec_store);
      }
    }
    first += advance;
    if (first >= t.cap) first -= t.cap;
  }
}

size_t align16(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

// Blocks of `threads` threads and `smem` bytes that a multiprocessor holds:
// registers are split among its four schedulers, each holding whole warps.
int blocks_per_sm(int regs, int threads, size_t smem) {
  const auto* props = at::cuda::getCurrentDeviceProperties();
  const int warps = (threads + 31) / 32, per_warp = (regs * 32 + 255) / 256 * 256;
  const int quarter = props->regsPerMultiprocessor / 4;
  int blocks = std::min(props->maxThreadsPerMultiProcessor / (warps * 32), props->maxBlocksPerMultiProcessor);
  blocks = std::min<int>(blocks, int(props->sharedMemPerMultiprocessor / (smem + props->reservedSharedMemPerBlock)));
  while (blocks > 0 && (blocks * warps + 3) / 4 * per_warp > quarter) --blocks;
  return blocks;
}

// The block's shape, of all that fit: the share of the channels (a whole
// pixel's up to 512 bytes, halved down to one thread's lanes), tiles across
// the row, rows a step and steps staged ahead. The score is the warps a
// multiprocessor holds (up to 16: on an H100 16 warps kept the schedulers
// issuing at 2.3-2.5 instructions a cycle), times the share of staged columns
// that are outputs' (the rest are read twice), a little less with one step
// staged ahead or shares under 128 bytes a pixel (less of each line read);
// near-equal scores go to more, smaller blocks a multiprocessor (fewer warps
// wait at each barrier).
template <typename scalar_t>
std::optional<RowTiling> row_tiling(const Geometry& g, int tj, bool unit, int word, int regs) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = thread_lanes<scalar_t>();
  constexpr int64_t kElem = sizeof(scalar_t);
  const auto* props = at::cuda::getCurrentDeviceProperties();
  const int64_t granule = std::max<int64_t>(V, word > 0 ? word / kElem : 1);
  const int kwp = int(ceil_div(g.kw, tj) * tj);
  const int64_t strips_total = ceil_div(g.dst_w, kS);
  std::optional<RowTiling> best;
  double best_score = 0;
  int best_blocks = 0;
  for (int64_t parts = ceil_div(g.dst_c * kElem, 512);; parts *= 2) {
    const int64_t pl = ceil_div(ceil_div(g.dst_c, parts), granule) * granule, cgs = pl / V;
    const size_t w_bytes = align16(size_t(g.kh) * kwp * pl * sizeof(opmath_t));
    for (int64_t tiles_x = 1, last = 0; tiles_x <= strips_total; ++tiles_x) {
      const int64_t strips_x = ceil_div(strips_total, tiles_x);
      if (strips_x == last) continue;
      last = strips_x;
      if (cgs * strips_x > kRowThreads) continue;
      const int64_t tw = strips_x * kS;
      const int64_t in_cols = unit ? tw + kwp - 1 : (tw - 1) * g.sw + int64_t(kwp - 1) * g.dw + 1;
      const int64_t rs_most = std::clamp<int64_t>(kRowThreads / (cgs * strips_x), 1, std::min<int64_t>(8, g.dst_h));
      for (int64_t rs = 1; rs <= rs_most; ++rs) {
        const int64_t span = (rs - 1) * g.sh + int64_t(g.kh - 1) * g.dh + 1;
        for (int depth = 2; depth >= 1; --depth) {
          const int64_t cap = span + depth * rs * g.sh;
          const int64_t elems = cap * in_cols * pl;
          const size_t smem = w_bytes + size_t(elems) * kElem;
          if (elems > (int64_t(1) << 30) || smem > props->sharedMemPerBlockOptin) continue;
          const int threads = int((cgs * strips_x * rs + 31) / 32 * 32);
          const int blocks = blocks_per_sm(regs, threads, smem);
          if (blocks == 0) continue;
          const double score = std::min(blocks * threads / 32, 16) * double(tw) / double(in_cols) *
                               (depth == 2 ? 1.0 : 0.95) * std::sqrt(std::min(1.0, double(pl * kElem) / 128));
          if (score < best_score * 0.99 || (score < best_score * 1.01 && blocks <= best_blocks)) continue;
          best_score = std::max(score, best_score);
          best_blocks = blocks;
          RowTiling t{};
          t.pl = int(pl);
          t.chunks = int(ceil_div(g.dst_c, pl));
          t.strips_x = int(strips_x);
          t.tw = int(tw);
          t.tiles_x = int(ceil_div(strips_total, strips_x));
          t.rs = int(rs);
          t.span = int(span);
          t.depth = depth;
          t.cap = int(cap);
          t.in_cols = int(in_cols);
          t.kwp = kwp;
          t.slot_elems = int(in_cols * pl);
          t.w_bytes = int(w_bytes);
          t.wpp = word > 0 ? int(pl * kElem / word) : int(pl);
          t.threads = threads;
          t.smem = smem;
          best = t;
        }
      }
    }
    if (pl <= granule) break;
  }
  return best;
}

// Bands: the count whose waves of blocks take the fewest row-steps, a block
// costing its steps plus the span its first step stages (e.g. 64 images of
// 56 rows, 3x3, on 264 resident blocks: 4 bands of 14 rows in one wave, not
// 8 of 7 in two).
template <typename scalar_t, int TJ, bool UNIT>
bool run_corr(const Source<scalar_t>& src, const scalar_t* weight, const scalar_t* bias, scalar_t* dst,
              const Geometry& g, cudaStream_t stream) {
  auto kernel = row_corr_kernel<scalar_t, TJ, UNIT>;
  static Memo<std::optional<RowTiling>> memo;
  const auto t = memo.get(key_of(g, src.word), [&]() -> std::optional<RowTiling> {
    auto t = row_tiling<scalar_t>(g, TJ, UNIT, src.word, prepare(kernel));
    if (!t) return t;
    const int64_t resident = launch::resident_blocks(kernel, t->threads, int64_t(t->smem));
    const int64_t base = t->chunks * g.batch * t->tiles_x, steps = ceil_div(g.dst_h, t->rs);
    double best = -1;
    for (int64_t bands = 1; bands <= steps; ++bands) {
      const int64_t per = ceil_div(steps, bands);
      if (bands > 1 && ceil_div(steps, bands - 1) == per) continue;
      const double cost = double(ceil_div(base * ceil_div(steps, per), resident)) * double(per * t->rs + t->span);
      if (best < 0 || cost < best) {
        best = cost;
        t->band = int(per * t->rs);
      }
    }
    t->bands = int(ceil_div(g.dst_h, t->band));
    if (base * t->bands > std::numeric_limits<int>::max() || g.src_h * g.src_w > std::numeric_limits<int>::max()) {
      return std::nullopt;
    }
    return t;
  });
  if (!t) return false;
  const int64_t blocks = t->chunks * g.batch * t->tiles_x * t->bands;
  kernel<<<unsigned(blocks), t->threads, t->smem, stream>>>(src, weight, bias, dst, g, *t);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// Tap blocks: the kernel width itself for 1, 3, 5 and 7, blocks of 4 otherwise.
template <typename scalar_t>
bool launch_corr(const Source<scalar_t>& src, const scalar_t* weight, const scalar_t* bias, scalar_t* dst,
                 const Geometry& g, cudaStream_t stream) {
  if (g.sw != 1 || g.dw != 1) return run_corr<scalar_t, 1, false>(src, weight, bias, dst, g, stream);
  switch (g.kw) {
    case 1:
      return run_corr<scalar_t, 1, true>(src, weight, bias, dst, g, stream);
    case 3:
      return run_corr<scalar_t, 3, true>(src, weight, bias, dst, g, stream);
    case 5:
      return run_corr<scalar_t, 5, true>(src, weight, bias, dst, g, stream);
    case 7:
      return run_corr<scalar_t, 7, true>(src, weight, bias, dst, g, stream);
    default:
      return run_corr<scalar_t, 4, true>(src, weight, bias, dst, g, stream);
  }
}

// ---------------------------------------------------------------------------
// Direct kernels: one thread per pixel and V lanes of the destination.

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    direct_forward_kernel(const scalar_t* __restrict__ src, const scalar_t* __restrict__ weight,
                          const scalar_t* __restrict__ bias, scalar_t* __restrict__ dst, Geometry g, int64_t total) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = thread_lanes<scalar_t>();
  const int64_t groups = ceil_div(g.dst_c, V);
  const int taps = g.kh * g.kw;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = idx % groups * V, pix = idx / groups;
    const int64_t ox = pix % g.dst_w, rest = pix / g.dst_w, oy = rest % g.dst_h, n = rest / g.dst_h;
    const int live = static_cast<int>(std::min<int64_t>(V, g.dst_c - o));
    opmath_t acc[V] = {}, bv[V] = {};
    for (int v = 0; v < live; ++v) bv[v] = bias != nullptr ? static_cast<opmath_t>(bias[o + v]) : opmath_t(0);
    for (int i = 0; i < g.kh; ++i) {
      const int64_t y = oy * g.sh - g.ph + int64_t(i) * g.dh;
      if (y < 0 || y >= g.src_h) continue;
      for (int j = 0; j < g.kw; ++j) {
        const int64_t x = ox * g.sw - g.pw + int64_t(j) * g.dw;
        if (x < 0 || x >= g.src_w) continue;
        const scalar_t* px = src + ((n * g.src_h + y) * g.src_w + x) * g.src_c;
#pragma unroll
        for (int v = 0; v < V; ++v) {
          if (v < live) {
            acc[v] += static_cast<opmath_t>(weight[(o + v) * taps + i * g.kw + j]) *
                      static_cast<opmath_t>(px[(o + v) / g.m]);
          }
        }
      }
    }
    store_lanes<scalar_t, V>(dst + pix * g.dst_c + o, acc, bv, live, false);
  }
}

// Input gradient for any stride, dilation and multiplier: each input pixel
// gathers the output gradients whose windows read it, visiting only the taps
// that do (TapWalk), in a fixed order. g is the forward geometry (src = input,
// dst = output). A thread owns V lanes, 16 bytes (8 lanes in half types:
// finding the taps costs as much as the products of 4 lanes); vec: they load
// and store as one word (m == 1, whole words of channels, aligned). Image
// coordinates fit in 32 bits (the plan's sizes do); index_t holds offsets into
// the tensors.
template <typename scalar_t>
constexpr int gather_lanes() {
  return 16 / static_cast<int>(sizeof(scalar_t));
}

template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kThreads)
    direct_input_grad_kernel(const scalar_t* __restrict__ gout, const scalar_t* __restrict__ weight,
                             scalar_t* __restrict__ gin, Geometry g, index_t total, bool vec) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = gather_lanes<scalar_t>();
  const index_t groups = static_cast<index_t>(ceil_div(g.src_c, V));
  const index_t src_h = static_cast<index_t>(g.src_h), src_w = static_cast<index_t>(g.src_w);
  const index_t dst_c = static_cast<index_t>(g.dst_c);
  const int taps = g.kh * g.kw, out_h = static_cast<int>(g.dst_h), out_w = static_cast<int>(g.dst_w);
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t c = idx % groups * V, pix = idx / groups;
    const index_t x = pix % src_w, rest = pix / src_w, y = rest % src_h, n = rest / src_h;
    const int live = static_cast<int>(std::min<int64_t>(V, g.src_c - c));
    opmath_t acc[V] = {}, zero[V] = {};
    TapWalk rows(static_cast<int>(y) + g.ph, g.sh, g.dh);
    for (int i = 0; i < g.kh && !rows.past(); ++i, rows.next()) {
      if (!rows.hits(out_h)) continue;
      const scalar_t* grow = gout + (n * out_h + rows.q) * out_w * dst_c;
      TapWalk cols(static_cast<int>(x) + g.pw, g.sw, g.dw);
      for (int j = 0; j < g.kw && !cols.past(); ++j, cols.next()) {
        if (!cols.hits(out_w)) continue;
        const scalar_t* pg = grow + cols.q * dst_c;
        const scalar_t* tap = weight + i * g.kw + j;
        if (vec) {
          opmath_t v[V];
          load_lanes<scalar_t, V>(pg + c, v);
#pragma unroll
          for (int k = 0; k < V; ++k) acc[k] += static_cast<opmath_t>(tap[(c + k) * taps]) * v[k];
          continue;
        }
        for (int t = 0; t < g.m; ++t) {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            if (k < live) {
              const index_t oc = (c + k) * g.m + t;
              acc[k] += static_cast<opmath_t>(tap[oc * taps]) * static_cast<opmath_t>(pg[oc]);
            }
          }
        }
      }
    }
    store_lanes<scalar_t, V>(gin + pix * g.src_c + c, acc, zero, live, vec);
  }
}

// The input gradient at any stride and dilation where m == 1 and a pixel's
// channels are whole aligned words (V lanes, 16 bytes): a gather as
// direct_input_grad_kernel's, laid out so that little but the loads is left.
// Blocks stride over the rows of the input gradient (blockIdx.y), so the
// output-gradient rows a row reads are the block's, and its threads cover
// the row's (column, word) pairs, the word fastest, so that stores and loads
// coalesce. Only the taps that hit are visited: at dilation 1 the taps of an
// axis that read position p are i = (p + pad) mod s, then every s-th, their
// outputs one apart (at stride 2 a 5x5 window has 1 to 4 of its 25 taps per
// pixel, and walking all of them cost more than the loads). The taps' values
// come from a tap-major copy of the weight in opmath (`taps`: kh*kw rows of
// C), one word a tap from L1, where the weight's own layout takes V
// scattered loads. The direct kernel, spending its time on those walks,
// divisions and loads, moved 2-20% of the copy bandwidth's bytes at stride 2.
struct HitTaps {
  int tap, out;  // the first tap that reads the position, and the output it writes
  __device__ __forceinline__ HitTaps(int pos_plus_pad, int stride)
      : tap(pos_plus_pad % stride), out(pos_plus_pad / stride) {}
};

// The weight (C, kh*kw) as the tap-major opmath table row_input_grad_kernel reads. A launch of its own rather than
// ATen's copy_: the copy's dispatch and TensorIterator cost the host more than the launch, once per backward.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    tap_major_kernel(const scalar_t* __restrict__ weight, at::opmath_type<scalar_t>* __restrict__ taps, int64_t C,
                     int64_t taps_per_channel) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= C * taps_per_channel) return;
  const int64_t tap = i / C, c = i - tap * C;
  taps[i] = static_cast<at::opmath_type<scalar_t>>(weight[c * taps_per_channel + tap]);
}

template <typename scalar_t, bool kUnitDilation>
__global__ void __launch_bounds__(kThreads)
    row_input_grad_kernel(const scalar_t* __restrict__ gout, const at::opmath_type<scalar_t>* __restrict__ taps,
                          scalar_t* __restrict__ gin, Geometry g, int words) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = gather_lanes<scalar_t>();
  const int idx = blockIdx.x * kThreads + threadIdx.x;
  if (idx >= g.src_w * words) return;
  const int word = idx % words, x = idx / words;
  const int64_t C = g.src_c;
  const int out_h = static_cast<int>(g.dst_h), out_w = static_cast<int>(g.dst_w);
  const HitTaps col0(x + g.pw, g.sw);
  const auto accumulate = [&](opmath_t (&acc)[V], const scalar_t* grow, int tap_row, int j, int q) {
    opmath_t v[V];
    load_lanes<scalar_t, V>(grow + q * C, v);
    const auto* tap = reinterpret_cast<const launch::Pack<opmath_t, V>*>(taps + (tap_row + j) * C + word * V);
    const auto t = *tap;
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] += t.v[k] * v[k];
  };
  for (int64_t row = blockIdx.y; row < g.batch * g.src_h; row += gridDim.y) {
    const int64_t n = row / g.src_h;
    const int y = static_cast<int>(row - n * g.src_h);
    opmath_t acc[V] = {}, zero[V] = {};
    if constexpr (kUnitDilation) {
      const HitTaps row0(y + g.ph, g.sh);
      for (int i = row0.tap, qy = row0.out; i < g.kh && qy >= 0; i += g.sh, --qy) {
        if (qy >= out_h) continue;
        const scalar_t* grow = gout + (n * out_h + qy) * out_w * C + word * V;
        for (int j = col0.tap, qx = col0.out; j < g.kw && qx >= 0; j += g.sw, --qx) {
          if (qx < out_w) accumulate(acc, grow, i * g.kw, j, qx);
        }
      }
    } else {
      TapWalk rows(y + g.ph, g.sh, g.dh);
      for (int i = 0; i < g.kh && !rows.past(); ++i, rows.next()) {
        if (!rows.hits(out_h)) continue;
        const scalar_t* grow = gout + (n * out_h + rows.q) * out_w * C + word * V;
        TapWalk cols(x + g.pw, g.sw, g.dw);
        for (int j = 0; j < g.kw && !cols.past(); ++j, cols.next()) {
          if (cols.hits(out_w)) accumulate(acc, grow, i * g.kw, j, cols.q);
        }
      }
    }
    store_lanes<scalar_t, V>(gin + (row * g.src_w + x) * C + word * V, acc, zero, V, true);
  }
}

// The tensor-core kernel (half types, windows up to 9x9 at unit stride), then
// the column kernels (3x3 windows), over these buffers, where they take g;
// false: neither ran.
bool run_specialized(const Geometry& g, const void* src, const void* weight, const void* bias, void* dst,
                     at::ScalarType dtype, cudaStream_t stream) {
  if (g.src_c != g.dst_c) return false;
  columns::Problem p{src, weight, bias, dst, dtype, g.batch, g.dst_c, g.src_h, g.src_w, g.dst_h, g.dst_w};
  p.kh = g.kh, p.kw = g.kw, p.sh = g.sh, p.sw = g.sw, p.dh = g.dh, p.dw = g.dw, p.ph = g.ph, p.pw = g.pw;
  p.m = g.m;
  p.flipped = g.flipped;
  return mma::run(p, stream) || (columns::enabled() && columns::run(p, stream));
}

} // namespace

void forward(const conv::DepthwisePlan& p) {
  if (p.out.numel() == 0) return;
  const Geometry g = forward_geometry(p);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_nhwc", [&] {
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* b = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* out = p.out.data_ptr<scalar_t>();
    if (run_specialized(g, p.x.const_data_ptr(), w, b, out, p.x.scalar_type(), stream)) return;
    if (!launch_corr(source<scalar_t>(p.x, g.m), w, b, out, g, stream)) {
      const int64_t total = p.out.numel() / p.s.O * ceil_div(p.s.O, thread_lanes<scalar_t>());
      direct_forward_kernel<scalar_t><<<grid_for(ceil_div(total, kThreads)), kThreads, 0, stream>>>(
          p.x.const_data_ptr<scalar_t>(), w, b, out, g, total);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

void input_grad(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  const auto& p = bp.p;
  const Geometry f = forward_geometry(p);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_nhwc_input_grad", [&] {
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    scalar_t* gin = grad_input.data_ptr<scalar_t>();
    bool done = false;
    if (f.sh == 1 && f.sw == 1 && f.m == 1) {
      // The transposed correlation: output gradients, flipped taps, padding
      // (k-1)*d - p (possibly negative).
      const Geometry t{f.batch, f.dst_c, f.src_c, f.dst_h, f.dst_w, f.src_h, f.src_w, f.kh, f.kw, 1, 1, f.dh, f.dw,
                       (f.kh - 1) * f.dh - f.ph, (f.kw - 1) * f.dw - f.pw, 1, true};
      done = run_specialized(t, bp.gout.const_data_ptr(), w, nullptr, gin, p.x.scalar_type(), stream) ||
             launch_corr(source<scalar_t>(bp.gout, 1), w, static_cast<const scalar_t*>(nullptr), gin, t, stream);
    }
    if (!done) {
      constexpr int V = gather_lanes<scalar_t>();
      const scalar_t* g = bp.gout.const_data_ptr<scalar_t>();
      const int64_t total = grad_input.numel() / p.s.C * ceil_div(p.s.C, V);
      const bool vec = f.m == 1 && p.s.C % V == 0 && launch::aligned(g, V * sizeof(scalar_t)) &&
                       launch::aligned(gin, V * sizeof(scalar_t));
      if (vec && f.src_w * (p.s.C / V) <= std::numeric_limits<int32_t>::max()) {
        using opmath_t = at::opmath_type<scalar_t>;
        // (C, 1, kh, kw) -> (kh*kw, C) in opmath: a tap's channels as one word. A new tensor, so that its
        // words are aligned (a view of the weight's storage may not be: one tap, an offset weight).
        const int64_t taps_per_channel = f.kh * f.kw;
        const at::Tensor taps = at::empty({taps_per_channel, p.s.C}, p.weight.options().dtype(
                                              at::toOpMathType(p.x.scalar_type())));
        tap_major_kernel<scalar_t><<<grid_for(ceil_div(taps.numel(), kThreads)), kThreads, 0, stream>>>(
            w, taps.data_ptr<opmath_t>(), p.s.C, taps_per_channel);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        const int words = static_cast<int>(p.s.C / V);
        const dim3 grid(static_cast<unsigned>(ceil_div(f.src_w * words, kThreads)),
                        static_cast<unsigned>(std::min<int64_t>(f.batch * f.src_h, 65535)));
        const auto kernel = f.dh == 1 && f.dw == 1 ? row_input_grad_kernel<scalar_t, true>
                                                   : row_input_grad_kernel<scalar_t, false>;
        kernel<<<grid, kThreads, 0, stream>>>(g, taps.const_data_ptr<opmath_t>(), gin, f, words);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return;
      }
      launch::with_index_type(std::max(grad_input.numel(), bp.gout.numel()), [&](auto index) {
        using index_t = decltype(index);
        direct_input_grad_kernel<scalar_t, index_t><<<grid_for(ceil_div(total, kThreads)), kThreads, 0, stream>>>(
            g, w, gin, f, static_cast<index_t>(total), vec);
      });
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

} // namespace customops::cuda::depthwise_nhwc
