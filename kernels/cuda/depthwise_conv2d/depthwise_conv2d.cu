// depthwise_conv2d on CUDA: direct kernels, no column buffer. This file holds
// the NCHW kernels; channels_last plans run the NHWC kernels of nhwc.cu
// (forward, input gradient) and nhwc_wgrad.cu (weight gradient).
//
// The work is a plane-to-plane correlation. Forward: output channel o
// correlates input channel o/m with its kh x kw taps. Input gradient (unit
// stride): input channel c correlates the m output-gradient channels c*m+t
// with their flipped taps, padded by (k-1)*d - p. Both run in one tiled kernel
// when the row direction has unit stride and dilation: a block stages a tile of
// the source and the taps in shared memory, and each thread computes kR
// neighbouring outputs kR taps at a time from 2*kR source values held in
// registers (kR*kR multiply-adds per 3*kR shared loads). Kernel widths are
// padded to a multiple of kR with zero taps. 3x3 and 5x5 at unit stride, the
// common case, take a register kernel that needs no padding instead (on an
// H100 it ran the 3x3 forward in half the tiles' time, 0.14 against 0.28 ms
// for 32x384x56x56 fp32). Other geometries take one-thread-per-output
// kernels; the input gradient's visits only the taps that read its pixel
// (square 3, 5 and 7 windows at stride 2 take period_dgrad.cu's instead). The
// weight gradient is reduced per (batch chunk, channel) in a fixed order (3x3
// and 5x5 keep every tap's sum in registers, except on wide planes at unit
// stride, which take tiles), and the chunks summed in order: deterministic.
// Where all its blocks are resident at once (small layers), the same kernel
// sums the chunks after a grid-wide barrier (a cooperative launch): one launch,
// as cuDNN's; elsewhere a second kernel sums them (sum_parts), in the same
// order, so the same bits.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAException.h>
#include "kernels/cuda/common/device_guard.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/conv2d.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/depthwise_conv2d/common.cuh"
#include "kernels/cuda/depthwise_conv2d/direct.h"
#include "kernels/cuda/depthwise_conv2d/nhwc.cuh"

namespace customops::cuda {
namespace {

constexpr int kR = 8;                    // outputs and taps per thread and step
constexpr int kTileW = 64, kTileH = 16;  // weight-gradient tiles
constexpr int kThreads = 256;            // block size, at most
constexpr int kMaxRuns = 32;             // runs of kR outputs per correlation tile row

unsigned grid_for(int64_t blocks) {
  return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 30));
}

// dst[n, o] = sum over t of src[n, source(o, t)] correlated with the taps of
// weight channel source(o, t) (flipped when transposed).
struct Corr {
  int64_t src_channels, dst_channels;
  int64_t src_h, src_w, dst_h, dst_w;
  int kh, kw, sh, sw, dh, dw, ph, pw;  // ph, pw are negative for some transposed geometries
  int m;
  bool transposed;  // input gradient: source channels o*m .. o*m+m-1, flipped taps
};

__device__ __forceinline__ int64_t source_channel(const Corr& c, int64_t o, int t) {
  return c.transposed ? o * c.m + t : o / c.m;
}

template <int N, typename T>
__device__ __forceinline__ void load_span(const T* p, T (&v)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = p[k];
}

// Shared-memory spans start at multiples of 8 floats: 16-byte loads.
template <int N>
__device__ __forceinline__ void load_span(const float* p, float (&v)[N]) {
  static_assert(N % 4 == 0, "spans of whole float4s");
  const float4* q = reinterpret_cast<const float4*>(p);
#pragma unroll
  for (int k = 0; k < N / 4; ++k) {
    const float4 f = q[k];
    v[4 * k] = f.x;
    v[4 * k + 1] = f.y;
    v[4 * k + 2] = f.z;
    v[4 * k + 3] = f.w;
  }
}

template <typename scalar_t, int N>
struct Pack {
  scalar_t v[N];
};

// Stores a run of KR outputs, the first `left` of them where the row ends
// sooner: whole words of up to 16 bytes where aligned (a warp then writes full
// lines).
template <int KR, typename scalar_t>
__device__ __forceinline__ void store_run(scalar_t* out, const Pack<scalar_t, KR>& p, int64_t left) {
  constexpr int kWord = 16 / sizeof(scalar_t) < KR ? 16 / sizeof(scalar_t) : KR;
  struct alignas(sizeof(scalar_t) * kWord) Word {
    scalar_t v[kWord];
  };
  if (left >= KR && reinterpret_cast<uintptr_t>(out) % sizeof(Word) == 0) {
#pragma unroll
    for (int k = 0; k < KR; k += kWord) {
      Word w;
#pragma unroll
      for (int q = 0; q < kWord; ++q) w.v[q] = p.v[k + q];
      *reinterpret_cast<Word*>(out + k) = w;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < KR; ++k) {
    if (k < left) out[k] = p.v[k];
  }
}

// Stages rows x cols source values from (y0, x0) on, zero outside the plane.
// The thread's position advances without divisions, and the loads of several
// steps are issued before their stores: staging is what small kernels spend
// their time on.
template <typename scalar_t, typename opmath_t>
__device__ __forceinline__ void stage(opmath_t* s, const scalar_t* plane, int h, int w, int y0, int x0, int rows,
                                      int cols, int tid, int threads) {
  const int step_r = threads / cols, step_q = threads % cols;
  int r = tid / cols, q = tid % cols;
#pragma unroll 4
  for (int k = tid; k < rows * cols; k += threads) {
    const int y = y0 + r, x = x0 + q;
    s[k] = (y >= 0 && y < h && x >= 0 && x < w) ? static_cast<opmath_t>(plane[y * w + x]) : opmath_t(0);
    r += step_r;
    q += step_q;
    if (q >= cols) {
      q -= cols;
      ++r;
    }
  }
}

struct TileShape {
  int kwp, rows, cols;  // padded kernel width, staged source rows and columns
  size_t smem;
};

// Source rows and columns that a tile of out_rows x out_cols outputs reads.
template <typename opmath_t>
TileShape tile_shape(const Corr& c, int out_rows, int out_cols, int step) {
  TileShape t;
  t.kwp = (c.kw + step - 1) / step * step;
  t.rows = (out_rows - 1) * c.sh + (c.kh - 1) * c.dh + 1;
  t.cols = out_cols + t.kwp;  // the last run's span reads up to out_cols + kwp - 1
  t.smem = sizeof(opmath_t) * (size_t(c.kh) * t.kwp + size_t(t.rows) * t.cols);
  return t;
}

// How the correlation kernel cuts a destination plane: tiles of `rows` rows of
// `runs` runs of KR outputs, one thread per run. Both are picked to waste the
// fewest threads, on idle lanes of the block and on rows past the plane's end
// (a 56-wide plane takes 7 runs, not 8).
struct Tiling {
  int runs, rows, tiles_x, tiles_y, threads;
  TileShape ts;
};

template <typename opmath_t, int KR>
Tiling choose_tiling(const Corr& c) {
  const int64_t runs_total = (c.dst_w + KR - 1) / KR;
  Tiling t{};
  t.tiles_x = int((runs_total + kMaxRuns - 1) / kMaxRuns);
  t.runs = int((runs_total + t.tiles_x - 1) / t.tiles_x);
  double best = -1;
  for (int rows = 1; rows * t.runs <= kThreads; ++rows) {
    const int threads = (rows * t.runs + 31) / 32 * 32;
    const int64_t tiles_y = (c.dst_h + rows - 1) / rows;
    const double used = double(rows * t.runs) / threads * double(c.dst_h) / double(tiles_y * rows);
    if (used >= best) {
      best = used;
      t.rows = rows;
      t.threads = threads;
    }
  }
  t.tiles_y = int((c.dst_h + t.rows - 1) / t.rows);
  t.ts = tile_shape<opmath_t>(c, t.rows, t.runs * KR, KR);
  return t;
}

// At least three blocks per SM (at most 85 registers a thread): with fewer,
// the 3x3 forward ran 20% slower on an H100; large kernels do not mind.
template <typename scalar_t, int KR>
__global__ void __launch_bounds__(kThreads, 3)
    tiled_corr_kernel(const scalar_t* __restrict__ src, const scalar_t* __restrict__ weight,
                      const scalar_t* __restrict__ bias, scalar_t* __restrict__ dst, Corr c, int64_t blocks,
                      Tiling t) {
  using opmath_t = at::opmath_type<scalar_t>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const TileShape& ts = t.ts;
  opmath_t* s_w = reinterpret_cast<opmath_t*>(smem_raw);
  opmath_t* s_in = s_w + c.kh * ts.kwp;
  const int tid = threadIdx.x, run = tid % t.runs, r = tid / t.runs;
  const bool active = r < t.rows;
  const int sources = c.transposed ? c.m : 1;
  const int tiles = t.tiles_x * t.tiles_y;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int tile = static_cast<int>(b % tiles);
    const int64_t plane = b / tiles;
    const int64_t o = plane % c.dst_channels, n = plane / c.dst_channels;
    const int64_t y0 = int64_t(tile / t.tiles_x) * t.rows, x0 = int64_t(tile % t.tiles_x) * t.runs * KR;
    opmath_t acc[KR] = {};
    for (int src_t = 0; src_t < sources; ++src_t) {
      const int64_t sc = source_channel(c, o, src_t);
      const scalar_t* taps = weight + (c.transposed ? sc : o) * c.kh * c.kw;
      __syncthreads();  // the previous source's tile is consumed
      for (int k = tid; k < c.kh * ts.kwp; k += blockDim.x) {
        const int i = k / ts.kwp, j = k % ts.kwp;
        const int tap = c.transposed ? (c.kh - 1 - i) * c.kw + (c.kw - 1 - j) : i * c.kw + j;
        s_w[k] = j < c.kw ? static_cast<opmath_t>(taps[tap]) : opmath_t(0);
      }
      stage(s_in, src + (n * c.src_channels + sc) * c.src_h * c.src_w, int(c.src_h), int(c.src_w),
            int(y0 * c.sh - c.ph), int(x0 - c.pw), ts.rows, ts.cols, tid, int(blockDim.x));
      __syncthreads();
      if (!active) continue;
      const opmath_t* base = s_in + r * c.sh * ts.cols + run * KR;
      for (int i = 0; i < c.kh; ++i) {
        const opmath_t* row = base + i * c.dh * ts.cols;
        const opmath_t* wi = s_w + i * ts.kwp;
        for (int jb = 0; jb < ts.kwp; jb += KR) {
          opmath_t v[2 * KR], wv[KR];
          load_span(row + jb, v);
          load_span(wi + jb, wv);
#pragma unroll
          for (int q = 0; q < KR; ++q) {
#pragma unroll
            for (int k = 0; k < KR; ++k) acc[k] += wv[q] * v[k + q];
          }
        }
      }
    }
    const int64_t oy = y0 + r, ox = x0 + run * KR;
    if (active && oy < c.dst_h) {
      const opmath_t bv = bias != nullptr ? static_cast<opmath_t>(bias[o]) : opmath_t(0);
      scalar_t* out = dst + (plane * c.dst_h + oy) * c.dst_w + ox;
      Pack<scalar_t, KR> p;
#pragma unroll
      for (int k = 0; k < KR; ++k) p.v[k] = static_cast<scalar_t>(acc[k] + bv);
      store_run(out, p, c.dst_w - ox);
    }
  }
}

// Small square kernels (K = 3 or 5) at unit stride and dilation, one source
// channel per output: each thread computes VEC neighbouring outputs of a run
// of rows. It keeps the K source rows of its current output row in registers
// (VEC + K - 1 values each) and loads one new row per output row, so every
// source value is read about once per thread and the taps are not padded, as
// the shared-memory tiles must pad them to kR: for 3x3 those tiles do 24
// multiply-adds an output where this kernel does 9.
template <typename scalar_t, int K, int VEC>
__global__ void __launch_bounds__(kThreads)
    small_corr_kernel(const scalar_t* __restrict__ src, const scalar_t* __restrict__ weight,
                      const scalar_t* __restrict__ bias, scalar_t* __restrict__ dst, Corr c, int64_t total,
                      int64_t runs, int run_rows) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kSpan = VEC + K - 1;
  const int64_t groups = (c.dst_w + VEC - 1) / VEC;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t xg = idx % groups, strip = idx / groups;
    const int64_t run = strip % runs, plane = strip / runs;
    const int64_t o = plane % c.dst_channels, n = plane / c.dst_channels;
    const int64_t sc = source_channel(c, o, 0);
    const scalar_t* s = src + (n * c.src_channels + sc) * c.src_h * c.src_w;
    const scalar_t* taps = weight + (c.transposed ? sc : o) * K * K;
    opmath_t w[K][K];
#pragma unroll
    for (int i = 0; i < K; ++i) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        w[i][j] = static_cast<opmath_t>(c.transposed ? taps[(K - 1 - i) * K + (K - 1 - j)] : taps[i * K + j]);
      }
    }
    const opmath_t bv = bias != nullptr ? static_cast<opmath_t>(bias[o]) : opmath_t(0);
    const int64_t ox = xg * VEC, x0 = ox - c.pw;
    opmath_t rows[K][kSpan];
    auto load = [&](int64_t y, opmath_t(&r)[kSpan]) {
      const bool inside = y >= 0 && y < c.src_h;
      const scalar_t* line = s + y * c.src_w;
#pragma unroll
      for (int j = 0; j < kSpan; ++j) {
        const int64_t x = x0 + j;
        r[j] = inside && x >= 0 && x < c.src_w ? static_cast<opmath_t>(line[x]) : opmath_t(0);
      }
    };
    const int64_t oy_begin = run * run_rows, oy_end = std::min<int64_t>(oy_begin + run_rows, c.dst_h);
#pragma unroll
    for (int i = 0; i < K - 1; ++i) load(oy_begin - c.ph + i, rows[i + 1]);
    for (int64_t oy = oy_begin; oy < oy_end; ++oy) {
#pragma unroll
      for (int i = 0; i < K - 1; ++i) {
#pragma unroll
        for (int j = 0; j < kSpan; ++j) rows[i][j] = rows[i + 1][j];
      }
      load(oy - c.ph + K - 1, rows[K - 1]);
      Pack<scalar_t, VEC> p;
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        opmath_t acc = 0;
#pragma unroll
        for (int i = 0; i < K; ++i) {
#pragma unroll
          for (int j = 0; j < K; ++j) acc += w[i][j] * rows[i][v + j];
        }
        p.v[v] = static_cast<scalar_t>(acc + bv);
      }
      store_run(dst + (plane * c.dst_h + oy) * c.dst_w + ox, p, c.dst_w - ox);
    }
  }
}

// Any stride and dilation: one thread per output. Image coordinates fit in 32
// bits (the plan's sizes do); index_t holds offsets into the tensors.
template <typename scalar_t, typename index_t>
__global__ void direct_forward_kernel(const scalar_t* __restrict__ src, const scalar_t* __restrict__ weight,
                                      const scalar_t* __restrict__ bias, scalar_t* __restrict__ dst, Corr c,
                                      index_t total) {
  using opmath_t = at::opmath_type<scalar_t>;
  const index_t dst_w = static_cast<index_t>(c.dst_w), dst_h = static_cast<index_t>(c.dst_h);
  const index_t dst_channels = static_cast<index_t>(c.dst_channels);
  const int src_h = static_cast<int>(c.src_h), src_w = static_cast<int>(c.src_w);
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t ox = idx % dst_w, rest = idx / dst_w;
    const index_t oy = rest % dst_h, plane = rest / dst_h;
    const index_t o = plane % dst_channels, n = plane / dst_channels;
    const scalar_t* s = src + (n * static_cast<index_t>(c.src_channels) + o / c.m) * src_h * src_w;
    const scalar_t* taps = weight + o * c.kh * c.kw;
    opmath_t acc = bias != nullptr ? static_cast<opmath_t>(bias[o]) : opmath_t(0);
    const int y0 = static_cast<int>(oy) * c.sh - c.ph, x0 = static_cast<int>(ox) * c.sw - c.pw;
    for (int i = 0; i < c.kh; ++i) {
      const int y = y0 + i * c.dh;
      if (y < 0 || y >= src_h) continue;
      for (int j = 0; j < c.kw; ++j) {
        const int x = x0 + j * c.dw;
        if (x >= 0 && x < src_w) {
          acc += static_cast<opmath_t>(taps[i * c.kw + j]) * static_cast<opmath_t>(s[index_t(y) * src_w + x]);
        }
      }
    }
    dst[idx] = static_cast<scalar_t>(acc);
  }
}

// Input gradient for any stride and dilation: one thread per input pixel
// gathers, in a fixed order, the output gradients whose windows cover it,
// visiting only the taps that read it (TapWalk). Here c describes the forward
// correlation (src = input, dst = output).
template <typename scalar_t, typename index_t>
__global__ void direct_input_grad_kernel(const scalar_t* __restrict__ gout, const scalar_t* __restrict__ weight,
                                         scalar_t* __restrict__ gin, Corr c, index_t total) {
  using opmath_t = at::opmath_type<scalar_t>;
  const index_t src_w = static_cast<index_t>(c.src_w), src_h = static_cast<index_t>(c.src_h);
  const index_t src_channels = static_cast<index_t>(c.src_channels);
  const int out_h = static_cast<int>(c.dst_h), out_w = static_cast<int>(c.dst_w);
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t x = idx % src_w, rest = idx / src_w;
    const index_t y = rest % src_h, plane = rest / src_h;
    const index_t ch = plane % src_channels, n = plane / src_channels;
    opmath_t acc = 0;
    for (int t = 0; t < c.m; ++t) {
      const index_t o = ch * c.m + t;
      const scalar_t* g = gout + (n * static_cast<index_t>(c.dst_channels) + o) * out_h * out_w;
      const scalar_t* taps = weight + o * c.kh * c.kw;
      TapWalk rows(static_cast<int>(y) + c.ph, c.sh, c.dh);
      for (int i = 0; i < c.kh && !rows.past(); ++i, rows.next()) {
        if (!rows.hits(out_h)) continue;
        TapWalk cols(static_cast<int>(x) + c.pw, c.sw, c.dw);
        for (int j = 0; j < c.kw && !cols.past(); ++j, cols.next()) {
          if (cols.hits(out_w)) {
            acc += static_cast<opmath_t>(taps[i * c.kw + j]) * static_cast<opmath_t>(g[index_t(rows.q) * out_w + cols.q]);
          }
        }
      }
    }
    gin[idx] = static_cast<scalar_t>(acc);
  }
}

// The weight gradient's last step, in the kernel that made the chunks' parts
// (partial[chunk, o, tap]): their fixed-order sums, rounded to scalar_t.
template <typename opmath_t, typename scalar_t>
__device__ __forceinline__ void fold_weight_grad(const opmath_t* partial, const Corr& c, int64_t batch,
                                                 int64_t per_chunk, scalar_t* __restrict__ folded) {
  const int64_t chunks = (batch + per_chunk - 1) / per_chunk;
  depthwise_detail::fold_parts(partial, chunks, c.dst_channels * c.kh * c.kw, folded);
}

// Weight gradient, tiled (unit stride and dilation along rows): a block sums one
// output channel over a chunk of images. Thread (pair, group) owns the kR taps
// (i, jb..jb+kR-1) of `pair` and every group-th run of kR outputs of a tile;
// the groups' sums are then added in group order.
template <typename scalar_t, bool kFold>
__global__ void __launch_bounds__(kThreads)
    tiled_weight_grad_kernel(const scalar_t* __restrict__ input, const scalar_t* __restrict__ gout,
                             at::opmath_type<scalar_t>* __restrict__ partial, Corr c, int64_t batch,
                             int64_t per_chunk, int64_t blocks, int tiles_x, int tiles, TileShape ts,
                             scalar_t* __restrict__ folded) {
  using opmath_t = at::opmath_type<scalar_t>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  opmath_t* s_g = reinterpret_cast<opmath_t*>(smem_raw);  // kTileH x kTileW output gradients
  opmath_t* s_in = s_g + kTileH * kTileW;                   // ts.rows x ts.cols inputs
  opmath_t* s_red = s_in + ts.rows * ts.cols;               // kThreads x kR sums
  const int jblocks = ts.kwp / kR, pairs = c.kh * jblocks, groups = kThreads / pairs;
  const int tid = threadIdx.x, pair = tid % pairs, group = tid / pairs;
  const bool active = group < groups;
  const int i = pair / jblocks, jb = pair % jblocks * kR;
  constexpr int kRuns = kTileH * (kTileW / kR);
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t o = b % c.dst_channels, chunk = b / c.dst_channels;
    const int64_t n_end = std::min(batch, (chunk + 1) * per_chunk);
    opmath_t acc[kR] = {};
    for (int64_t n = chunk * per_chunk; n < n_end; ++n) {
      const scalar_t* g_plane = gout + (n * c.dst_channels + o) * c.dst_h * c.dst_w;
      const scalar_t* x_plane = input + (n * c.src_channels + o / c.m) * c.src_h * c.src_w;
      for (int tile = 0; tile < tiles; ++tile) {
        const int64_t y0 = int64_t(tile / tiles_x) * kTileH, x0 = int64_t(tile % tiles_x) * kTileW;
        __syncthreads();
        stage(s_g, g_plane, int(c.dst_h), int(c.dst_w), int(y0), int(x0), kTileH, kTileW, tid, kThreads);
        stage(s_in, x_plane, int(c.src_h), int(c.src_w), int(y0 * c.sh - c.ph), int(x0 - c.pw), ts.rows, ts.cols,
              tid, kThreads);
        __syncthreads();
        if (!active) continue;
        // Outputs past the plane's edge have zero gradient but read real
        // pixels: their products are skipped, not added as 0 * x (an inf
        // there would make a NaN in a tap that never reads it).
        const int live_h = int(std::min<int64_t>(kTileH, c.dst_h - y0));
        const int live_w = int(std::min<int64_t>(kTileW, c.dst_w - x0));
        for (int run = group; run < kRuns; run += groups) {
          const int oy = run / (kTileW / kR), xb = run % (kTileW / kR) * kR;
          if (oy >= live_h || xb >= live_w) continue;
          const int live = live_w - xb;
          opmath_t g[kR], v[2 * kR];
          load_span(s_g + oy * kTileW + xb, g);
          load_span(s_in + (oy * c.sh + i * c.dh) * ts.cols + xb + jb, v);
#pragma unroll
          for (int q = 0; q < kR; ++q) {
#pragma unroll
            for (int r = 0; r < kR; ++r) {
              if (r < live) acc[q] += g[r] * v[r + q];
            }
          }
        }
      }
    }
    __syncthreads();
    if (active) {
#pragma unroll
      for (int q = 0; q < kR; ++q) s_red[(group * pairs + pair) * kR + q] = acc[q];
    }
    __syncthreads();
    for (int k = tid; k < pairs * kR; k += kThreads) {
      opmath_t sum = 0;
      for (int gi = 0; gi < groups; ++gi) sum += s_red[gi * pairs * kR + k];
      const int ii = k / kR / jblocks, jj = k / kR % jblocks * kR + k % kR;
      if (jj < c.kw) partial[((chunk * c.dst_channels + o) * c.kh + ii) * c.kw + jj] = sum;
    }
  }
  if constexpr (kFold) fold_weight_grad(partial, c, batch, per_chunk, folded);
}

// Weight gradient for any geometry: a block per (chunk, channel, tap) reduces
// its products with a fixed-shape tree.
template <typename scalar_t, bool kFold>
__global__ void __launch_bounds__(kThreads)
    direct_weight_grad_kernel(const scalar_t* __restrict__ input, const scalar_t* __restrict__ gout,
                              at::opmath_type<scalar_t>* __restrict__ partial, Corr c, int64_t batch,
                              int64_t per_chunk, int64_t blocks, scalar_t* __restrict__ folded) {
  using opmath_t = at::opmath_type<scalar_t>;
  __shared__ opmath_t s_red[kThreads];
  const int taps = c.kh * c.kw;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int tap = static_cast<int>(b % taps);
    const int64_t o = b / taps % c.dst_channels, chunk = b / taps / c.dst_channels;
    const int i = tap / c.kw, j = tap % c.kw;
    const int64_t n0 = chunk * per_chunk, n_end = std::min(batch, n0 + per_chunk);
    const int64_t positions = (n_end - n0) * c.dst_h * c.dst_w;
    opmath_t acc = 0;
    for (int64_t p = threadIdx.x; p < positions; p += kThreads) {
      const int64_t ox = p % c.dst_w, rest = p / c.dst_w;
      const int64_t oy = rest % c.dst_h, n = n0 + rest / c.dst_h;
      const int64_t y = oy * c.sh - c.ph + int64_t(i) * c.dh, x = ox * c.sw - c.pw + int64_t(j) * c.dw;
      if (y >= 0 && y < c.src_h && x >= 0 && x < c.src_w) {
        acc += static_cast<opmath_t>(gout[((n * c.dst_channels + o) * c.dst_h + oy) * c.dst_w + ox]) *
               static_cast<opmath_t>(input[((n * c.src_channels + o / c.m) * c.src_h + y) * c.src_w + x]);
      }
    }
    __syncthreads();
    s_red[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) s_red[threadIdx.x] += s_red[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) partial[(chunk * c.dst_channels + o) * taps + tap] = s_red[0];
  }
  if constexpr (kFold) fold_weight_grad(partial, c, batch, per_chunk, folded);
}

// Weight gradient of a K x K window (K = 3 or 5) at any stride and dilation:
// a block sums one output channel over a chunk of images. Thread (r0, col)
// walks output column col (and col + tw, ...) of every rows-th output row of
// the chunk from r0 on, keeping all K*K tap sums in registers, so each output
// gradient is loaded once for every tap. The threads' sums are added in a
// fixed order (warp shuffles, then the warps in turn): deterministic. For
// these kernels the tiled kernel wastes most of its threads on small planes
// (0.68 ms against cuDNN's 0.24 for 128x960x7x7 fp32, 3x3), and the direct
// one walks the positions once per tap (2.3 ms against 0.67 for
// 128x96x112x112 fp32, 3x3, stride 2).
template <typename scalar_t, int K, bool kFold>
__global__ void __launch_bounds__(kThreads)
    small_weight_grad_kernel(const scalar_t* __restrict__ input, const scalar_t* __restrict__ gout,
                             at::opmath_type<scalar_t>* __restrict__ partial, Corr c, int64_t batch,
                             int64_t per_chunk, int64_t blocks, int tw, scalar_t* __restrict__ folded) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kWarps = kThreads / 32;
  __shared__ opmath_t s_warp[kWarps][K * K];
  const int rows = kThreads / tw, r0 = threadIdx.x / tw, col = threadIdx.x % tw;
  const int out_h = static_cast<int>(c.dst_h), out_w = static_cast<int>(c.dst_w);
  const int src_h = static_cast<int>(c.src_h), src_w = static_cast<int>(c.src_w);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t o = b % c.dst_channels, chunk = b / c.dst_channels;
    const int64_t n_end = std::min(batch, (chunk + 1) * per_chunk);
    opmath_t acc[K][K] = {};
    if (r0 < rows) {  // threads past the last whole row of tw idle
      int64_t n = chunk * per_chunk;
      int oy = r0;
      while (oy >= out_h) oy -= out_h, ++n;
      while (n < n_end) {
        const scalar_t* grow = gout + ((n * c.dst_channels + o) * out_h + oy) * out_w;
        const scalar_t* in = input + (n * c.src_channels + o / c.m) * int64_t(src_h) * src_w;
        const int y0 = oy * c.sh - c.ph;
        for (int ox = col; ox < out_w; ox += tw) {
          const opmath_t gv = static_cast<opmath_t>(grow[ox]);
          const int x0 = ox * c.sw - c.pw;
#pragma unroll
          for (int i = 0; i < K; ++i) {
            const int y = y0 + i * c.dh;
            if (y < 0 || y >= src_h) continue;
            const scalar_t* line = in + int64_t(y) * src_w;
#pragma unroll
            for (int j = 0; j < K; ++j) {
              const int x = x0 + j * c.dw;
              if (x >= 0 && x < src_w) acc[i][j] += gv * static_cast<opmath_t>(line[x]);
            }
          }
        }
        oy += rows;
        while (oy >= out_h) oy -= out_h, ++n;
      }
    }
#pragma unroll
    for (int i = 0; i < K; ++i) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        opmath_t v = acc[i][j];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) s_warp[warp][i * K + j] = v;
      }
    }
    __syncthreads();
    if (threadIdx.x < K * K) {
      opmath_t sum = 0;
      for (int w = 0; w < kWarps; ++w) sum += s_warp[w][threadIdx.x];
      partial[(chunk * c.dst_channels + o) * K * K + threadIdx.x] = sum;
    }
    __syncthreads();  // s_warp is written again by the next block's sums
  }
  if constexpr (kFold) fold_weight_grad(partial, c, batch, per_chunk, folded);
}

// The forward correlation of a plan: src = input, dst = output.
Corr forward_corr(const conv::DepthwisePlan& p) {
  const auto& s = p.s;
  const auto& w = p.w;
  return {s.C, s.O, s.H, s.W, s.out_h, s.out_w, int(w.kh), int(w.kw), int(w.sh), int(w.sw), int(w.dh),
          int(w.dw), int(w.ph), int(w.pw), int(p.m), false};
}

// Whether a tiled kernel can run: its geometry allows it and its tile fits in
// shared memory (raising the kernel's limit above the default 48 KiB if need be).
template <typename Kernel>
bool tiled_fits(Kernel* kernel, size_t smem, bool geometry_ok) {
  if (!geometry_ok) return false;
  if (smem > at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin) return false;
  if (smem > 48 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  return true;
}

template <typename scalar_t, int KR>
bool launch_tiled(const scalar_t* src, const scalar_t* weight, const scalar_t* bias, scalar_t* dst, const Corr& c,
                  int64_t planes, cudaStream_t stream) {
  using opmath_t = at::opmath_type<scalar_t>;
  const auto t = choose_tiling<opmath_t, KR>(c);
  auto kernel = tiled_corr_kernel<scalar_t, KR>;
  if (!tiled_fits(kernel, t.ts.smem, c.sw == 1 && c.dw == 1)) return false;
  const int64_t blocks = planes * t.tiles_x * t.tiles_y;
  kernel<<<grid_for(blocks), t.threads, t.ts.smem, stream>>>(src, weight, bias, dst, c, blocks, t);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <typename scalar_t, int K>
void launch_small(const scalar_t* src, const scalar_t* weight, const scalar_t* bias, scalar_t* dst, const Corr& c,
                  int64_t planes, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(scalar_t);
  const int64_t groups = (c.dst_w + kVec - 1) / kVec;
  const int rows = static_cast<int>(launch::rows_per_thread(planes * groups, c.dst_h, 8, 2048));
  const int64_t runs = (c.dst_h + rows - 1) / rows, total = planes * runs * groups;
  small_corr_kernel<scalar_t, K, kVec>
      <<<grid_for((total + kThreads - 1) / kThreads), kThreads, 0, stream>>>(src, weight, bias, dst, c, total, runs,
                                                                            rows);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Runs the correlation c over `planes` destination planes with the register
// or the tiled kernel; false when neither applies.
template <typename scalar_t>
bool launch_fast_corr(const scalar_t* src, const scalar_t* weight, const scalar_t* bias, scalar_t* dst, const Corr& c,
                      int64_t planes, cudaStream_t stream) {
  const bool unit = c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 && (!c.transposed || c.m == 1);
  if (unit && c.kh == 3 && c.kw == 3) {
    launch_small<scalar_t, 3>(src, weight, bias, dst, c, planes, stream);
    return true;
  }
  if (unit && c.kh == 5 && c.kw == 5) {
    launch_small<scalar_t, 5>(src, weight, bias, dst, c, planes, stream);
    return true;
  }
  // Runs of 4 for narrow kernels were measured slower (3x3: 0.33 ms against
  // 0.25 ms on an H100), so every width takes runs of kR.
  return launch_tiled<scalar_t, kR>(src, weight, bias, dst, c, planes, stream);
}

} // namespace

namespace depthwise {

// The kernels hold stride, padding and dilation as int (Corr, and Geometry in
// nhwc_common.cuh): int(w.sh) of 2^32 + 1 was 1, a computation for other
// arguments than the given ones. Window coordinates (y * sh - ph + i * dh, and
// (kh - 1) * dh - ph for the input gradient) lie within the padded input, so
// that must fit int too. (p.w's stride and dilation are already 1 where they
// change nothing: one output, one tap.)
void check_int_window(const char* op, const conv::DepthwisePlan& p, at::IntArrayRef stride, at::IntArrayRef padding,
                      at::IntArrayRef dilation) {
  const auto& w = p.w;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(std::max({w.sh, w.sw, w.ph, w.pw, w.dh, w.dw}) <= kMax, "customops::", op,
              ": expected stride, padding and dilation below 2^31 on CUDA, got stride ", stride, ", padding ",
              padding, ", dilation ", dilation);
  const int64_t padded_h = p.s.H + 2 * w.ph, padded_w = p.s.W + 2 * w.pw;
  TORCH_CHECK(padded_h <= kMax && padded_w <= kMax, "customops::", op,
              ": expected the padded input's height and width (input + 2*padding) below 2^31 on CUDA, got ",
              padded_h, " x ", padded_w);
}

} // namespace depthwise

namespace {

// Batch chunks of the weight gradient: enough (chunk, channel) blocks to fill
// the device a few times over.
int64_t images_per_chunk(int64_t batch, int64_t channels) {
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t chunks = std::clamp<int64_t>((8 * sms + channels - 1) / channels, 1, std::max<int64_t>(batch, 1));
  return (batch + chunks - 1) / chunks;
}

} // namespace

namespace depthwise {

at::Tensor forward(conv::DepthwisePlan& p) {
  p.out = conv::allocate_output(p);
  if (p.channels_last) {
    depthwise_nhwc::forward(p);
    return conv::unbatch(p.out, p.s);
  }
  const Corr c = forward_corr(p);
  if (p.out.numel() == 0) return conv::unbatch(p.out, p.s);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_cuda", [&] {
    const scalar_t* x = p.x.const_data_ptr<scalar_t>();
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* b = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* out = p.out.data_ptr<scalar_t>();
    if (!launch_fast_corr(x, w, b, out, c, p.s.N * p.s.O, stream)) {
      const int64_t total = p.out.numel();
      launch::with_index_type(std::max(total, p.x.numel()), [&](auto index) {
        using index_t = decltype(index);
        direct_forward_kernel<scalar_t, index_t><<<grid_for((total + kThreads - 1) / kThreads), kThreads, 0,
                                                   stream>>>(x, w, b, out, c, static_cast<index_t>(total));
      });
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return conv::unbatch(p.out, p.s);
}

conv::Grads backward(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& weight, std::array<bool, 3> output_mask) {
  if (bp.p.channels_last) {
    at::Tensor gi, gw, gb;
    if (output_mask[0]) {
      gi = at::empty_like(bp.p.x);  // dense channels_last, as p.x
      if (!period_input_grad(bp, gi)) depthwise_nhwc::input_grad(bp, gi);
      gi = conv::unbatch(gi, bp.p.s);
    }
    if (output_mask[1]) gw = depthwise_nhwc::weight_grad(bp, weight);
    if (output_mask[2]) gb = bp.gout.sum({0, 2, 3});
    return {gi, gw, gb};
  }
  const auto& p = bp.p;
  const Corr fwd = forward_corr(p);
  const auto stream = at::cuda::getCurrentCUDAStream();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty_like(p.x);
  const bool dgrad = output_mask[0] && p.x.numel() > 0;
  // Strided square windows by whole periods (period_dgrad.cu, which dispatches on the dtype itself).
  const bool by_periods = dgrad && period_input_grad(bp, grad_input);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_backward_cuda", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* g = bp.gout.const_data_ptr<scalar_t>();
    const scalar_t* x = p.x.const_data_ptr<scalar_t>();
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    if (dgrad && !by_periods) {
      // With unit strides, the transposed correlation: output gradients, flipped
      // taps, padding (k-1)*d - p (possibly negative).
      const Corr t{fwd.dst_channels, fwd.src_channels, fwd.dst_h, fwd.dst_w, fwd.src_h, fwd.src_w, fwd.kh,
                   fwd.kw, 1, 1, fwd.dh, 1, (fwd.kh - 1) * fwd.dh - fwd.ph, (fwd.kw - 1) - fwd.pw, fwd.m, true};
      const bool unit = fwd.sh == 1 && fwd.sw == 1 && fwd.dw == 1;
      scalar_t* gi = grad_input.data_ptr<scalar_t>();
      if (!(unit && launch_fast_corr(g, w, static_cast<const scalar_t*>(nullptr), gi, t, p.s.N * p.s.C, stream))) {
        const int64_t total = grad_input.numel();
        launch::with_index_type(std::max(total, bp.gout.numel()), [&](auto index) {
          using index_t = decltype(index);
          direct_input_grad_kernel<scalar_t, index_t><<<grid_for((total + kThreads - 1) / kThreads), kThreads, 0,
                                                        stream>>>(g, w, gi, fwd, static_cast<index_t>(total));
        });
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      }
    }
    if (output_mask[1]) {
      const int64_t per_chunk = images_per_chunk(p.s.N, p.s.O);
      const int64_t chunks = p.s.N == 0 ? 0 : (p.s.N + per_chunk - 1) / per_chunk;
      auto partial = at::empty({chunks, p.s.O, fwd.kh * fwd.kw}, p.x.options().dtype(at::toOpMathType(p.x.scalar_type())));
      auto ts = tile_shape<opmath_t>(fwd, kTileH, kTileW, kR);
      ts.smem += sizeof(opmath_t) * (kTileH * kTileW + kThreads * kR);
      const int tiles_x = int((fwd.dst_w + kTileW - 1) / kTileW);
      const int tiles = tiles_x * int((fwd.dst_h + kTileH - 1) / kTileH);
      const int64_t blocks = chunks * p.s.O;
      const bool fits = fwd.sw == 1 && fwd.dw == 1 && fwd.kh * (ts.kwp / kR) <= kThreads;
      // 3x3 and 5x5 take the tiles only at unit stride on planes wide enough to
      // fill half a tile row: on 56-wide planes the tiles were faster (0.58
      // against 0.75 ms for 128x144x56x56 fp32 on an H100), on 28-wide ones
      // slower (0.35 against 0.24).
      const bool small = fwd.kh == fwd.kw && (fwd.kh == 3 || fwd.kh == 5) && !(fits && 2 * fwd.dst_w > kTileW);
      const int tw = static_cast<int>(std::min<int64_t>(fwd.dst_w, kThreads));
      opmath_t* parts = partial.data_ptr<opmath_t>();
      // The kernel sums its chunks' parts itself where its grid is resident at once, else sum_parts does.
      at::Tensor folded = at::empty(weight.sizes(), p.x.options());
      scalar_t* out = folded.data_ptr<scalar_t>();
      const int64_t n = folded.numel();
      bool done = false;
      // The folding variant where its grid is resident at once, else the plain one; `work` blocks, each kernel's own
      // arguments (`args`), then the folded output (nullptr for the plain one).
      const auto launch = [&](auto folding, auto plain, int64_t work, size_t smem, auto... args) {
        done = launch_folding(folding, work, n, smem, stream, x, g, parts, fwd, p.s.N, per_chunk, work, args..., out);
        if (!done) {
          plain<<<grid_for(work), kThreads, smem, stream>>>(x, g, parts, fwd, p.s.N, per_chunk, work, args...,
                                                            static_cast<scalar_t*>(nullptr));
        }
      };
      if (blocks == 0) {
        // an empty batch: the partial sums are empty and sum to zero
      } else if (small && fwd.kh == 3) {
        launch(small_weight_grad_kernel<scalar_t, 3, true>, small_weight_grad_kernel<scalar_t, 3, false>, blocks, 0,
               tw);
      } else if (small) {
        launch(small_weight_grad_kernel<scalar_t, 5, true>, small_weight_grad_kernel<scalar_t, 5, false>, blocks, 0,
               tw);
      } else if (tiled_fits(tiled_weight_grad_kernel<scalar_t, true>, ts.smem, fits) &&
                 tiled_fits(tiled_weight_grad_kernel<scalar_t, false>, ts.smem, fits)) {
        launch(tiled_weight_grad_kernel<scalar_t, true>, tiled_weight_grad_kernel<scalar_t, false>, blocks, ts.smem,
               tiles_x, tiles, ts);
      } else {
        launch(direct_weight_grad_kernel<scalar_t, true>, direct_weight_grad_kernel<scalar_t, false>,
               blocks * fwd.kh * fwd.kw, 0);
      }
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      grad_weight = done ? folded : sum_parts(partial, p.x.scalar_type(), weight.sizes(), folded);
    }
  });
  if (output_mask[2]) grad_bias = bp.gout.sum({0, 2, 3});
  return {output_mask[0] ? conv::unbatch(grad_input, p.s) : grad_input, grad_weight, grad_bias};
}

} // namespace depthwise
} // namespace customops::cuda
