// depthwise_conv2d on CUDA, channels_last (NHWC in memory).
//
// In NHWC the channels of a pixel are contiguous. Every kernel here stages its
// input into shared memory in the same pixel-major layout (a block's share of
// each pixel's channels, zeros outside the image), with cp.async where the
// words are aligned, so that the next rows load while the current ones are
// used. A thread owns V lanes (4, or 2 doubles) and a strip of kS neighbouring
// outputs of a row: for each kernel row it slides over the kS + TJ - 1 staged
// columns of a block of TJ taps, so each staged value it reads feeds up to TJ
// taps. Tap blocks are the kernel width for 1, 3, 5, 7 and 4 otherwise, the
// missing taps skipped, never multiplied as zeros (0 * inf would be a NaN).
//
// 3x3 windows at row stride 1 or 2 first try the column kernels
// (depthwise_conv2d_nhwc_columns.cu: registers, no staging), faster there,
// for the forward and the unit-stride input gradient in every dtype (half
// types from 64 channels) and for the weight gradient. Half types' larger
// windows up to 9x9 at unit stride first try the tensor-core kernel
// (depthwise_conv2d_nhwc_mma.cu) for those two correlations.
//
// Forward (output channel o reads input channel o / m) and the input gradient
// at unit stride with m == 1 (the same correlation over grad_out with flipped
// taps and padding (k-1)*d - p) stream rows: a block owns a share of the
// channels (all of a pixel's up to 512 bytes), a tile of columns and a band of
// output rows, and keeps the input rows its steps read in a ring (row_corr_kernel).
// Other input gradients, and windows too large for shared memory, take direct
// kernels (one thread per pixel and V lanes, a fixed order of taps).
//
// Weight gradient: 3x3 windows at row stride 1 or 2 take the column kernel
// (depthwise_conv2d_nhwc_column_wgrad.cu). Otherwise a block owns 32 bytes of
// each pixel's channels and a band
// of kernel rows, and sums the products of a contiguous range of tiles of
// output positions (thread: V lanes, one kernel row, TJ taps, one row of each
// tile, sliding as above); the block's row groups are added in group order and
// the blocks' partial sums in order (sum_parts): deterministic, no atomics.
#include "kernels/cuda/depthwise_conv2d_nhwc.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/cuda/depthwise_common.cuh"
#include "kernels/cuda/depthwise_conv2d_nhwc_columns.cuh"
#include "kernels/cuda/depthwise_conv2d_nhwc_mma.cuh"
#include "kernels/cuda/launch.cuh"

namespace customops::cuda::depthwise_nhwc {
namespace {

constexpr int kS = 7;            // outputs per thread along a row
constexpr int kThreads = 256;    // block size, at most
constexpr int kChunkBytes = 32;  // bytes of a pixel's channels a block owns
constexpr size_t kTwoBufferBudget = 112 * 1024;  // shared memory of a double-buffered block

template <typename scalar_t>
constexpr int chunk_lanes() {
  return kChunkBytes / static_cast<int>(sizeof(scalar_t));
}

template <typename scalar_t>
constexpr int thread_lanes() {
  return sizeof(scalar_t) == 8 ? 2 : 4;
}

unsigned grid_for(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t(1) << 30));
}

__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// dst[n, y, x, o] = sum over taps of src[n, y*sh - ph + i*dh, x*sw - pw + j*dw, o / m] * tap(o, i, j).
struct Geometry {
  int64_t batch, src_c, dst_c, src_h, src_w, dst_h, dst_w;
  int kh, kw, sh, sw, dh, dw, ph, pw;  // ph, pw are negative for some input gradients
  int m;
  bool flipped;  // input gradient (m == 1): taps flipped
};

Geometry forward_geometry(const conv::DepthwisePlan& p) {
  const auto& s = p.s;
  const auto& w = p.w;
  return {s.N, s.C, s.O, s.H, s.W, s.out_h, s.out_w, int(w.kh), int(w.kw), int(w.sh), int(w.sw), int(w.dh),
          int(w.dw), int(w.ph), int(w.pw), int(p.m), false};
}

// ---------------------------------------------------------------------------
// Staging: a tile of rows x cols pixels, the chunk's lanes of each, into
// shared memory (pixel-major, chunk_lanes() per pixel).

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// One word from global to shared memory, zeros where !ok (src is then any
// valid address: cp.async reads no byte of a zero-length source).
template <typename Word>
__device__ __forceinline__ void copy_word(Word* dst, const void* src, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(Word) >= 4) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    const int bytes = ok ? int(sizeof(Word)) : 0;
    if constexpr (sizeof(Word) == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(int(sizeof(Word))),
                   "r"(bytes)
                   : "memory");
    }
    return;
  }
#endif
  *dst = ok ? *static_cast<const Word*>(src) : Word{};
}

// Contiguous lanes: the chunk's channels c0.. of img (channels per pixel),
// copied a word at a time. Each thread keeps one word of the pixel and steps
// over pixels without divisions.
template <typename scalar_t, typename Word>
__device__ __forceinline__ void stage_words(scalar_t* __restrict__ dst, const scalar_t* __restrict__ img, int64_t h,
                                            int64_t w, int64_t channels, int64_t c0, int64_t y0, int64_t x0,
                                            int rows, int cols) {
  constexpr int kLanes = chunk_lanes<scalar_t>();
  constexpr int kPer = sizeof(Word) / sizeof(scalar_t);
  constexpr int kWords = kLanes / kPer;
  const int tid = threadIdx.x, step = blockDim.x / kWords, pixels = rows * cols;
  const int u = tid % kWords;
  const int64_t ch = c0 + u * kPer;
  const bool lane_ok = ch < channels;  // channels is a multiple of kPer: whole words
  const int step_r = step / cols, step_q = step % cols;
  int p = tid / kWords, r = p / cols, q = p % cols;
  for (; p < pixels; p += step) {
    const int64_t y = y0 + r, x = x0 + q;
    const bool ok = lane_ok && y >= 0 && y < h && x >= 0 && x < w;
    copy_word(reinterpret_cast<Word*>(dst + p * kLanes + u * kPer), ok ? img + (y * w + x) * channels + ch : img, ok);
    q += step_q;
    r += step_r;
    if (q >= cols) {
      q -= cols;
      ++r;
    }
  }
}

// Lane by lane: lane l of the chunk holds channel (c0 + l) / m of img, for
// c0 + l < lanes_end (the channel multiplier's gather, and unaligned rows).
template <typename scalar_t>
__device__ __forceinline__ void stage_lanes(scalar_t* __restrict__ dst, const scalar_t* __restrict__ img, int64_t h,
                                            int64_t w, int64_t channels, int64_t c0, int64_t lanes_end, int m,
                                            int64_t y0, int64_t x0, int rows, int cols) {
  constexpr int kLanes = chunk_lanes<scalar_t>();
  const int tid = threadIdx.x, step = blockDim.x / kLanes, pixels = rows * cols;
  const int lane = tid % kLanes;
  const int64_t ch = (c0 + lane) / m;
  const bool lane_ok = c0 + lane < lanes_end;
  const int step_r = step / cols, step_q = step % cols;
  int p = tid / kLanes, r = p / cols, q = p % cols;
  for (; p < pixels; p += step) {
    const int64_t y = y0 + r, x = x0 + q;
    const bool ok = lane_ok && y >= 0 && y < h && x >= 0 && x < w;
    dst[p * kLanes + lane] = ok ? img[(y * w + x) * channels + ch] : scalar_t(0);
    q += step_q;
    r += step_r;
    if (q >= cols) {
      q -= cols;
      ++r;
    }
  }
}

// What a staging copies: the image (one batch element), its channels, and the
// chunk's first channel; word is the copy's width in bytes (0: lane by lane,
// reading channel lane / m). Blocks have a multiple of 32 threads, so every
// thread keeps one word (or lane) of the pixel.
template <typename scalar_t>
struct Source {
  const scalar_t* img;
  int64_t h, w, channels;
  int word, m;
};

template <typename scalar_t>
__device__ __forceinline__ void stage(scalar_t* dst, const Source<scalar_t>& s, int64_t c0, int64_t lanes_end,
                                      int64_t y0, int64_t x0, int rows, int cols) {
  switch (s.word) {
    case 16:
      stage_words<scalar_t, uint4>(dst, s.img, s.h, s.w, s.channels, c0, y0, x0, rows, cols);
      break;
    case 8:
      stage_words<scalar_t, uint2>(dst, s.img, s.h, s.w, s.channels, c0, y0, x0, rows, cols);
      break;
    case 4:
      if constexpr (sizeof(scalar_t) <= 4) {
        stage_words<scalar_t, uint32_t>(dst, s.img, s.h, s.w, s.channels, c0, y0, x0, rows, cols);
      }
      break;
    default:
      stage_lanes(dst, s.img, s.h, s.w, s.channels, c0, lanes_end, s.m, y0, x0, rows, cols);
  }
}

// The widest word (16, 8 or 4 bytes) that whole pixels' channel rows and the
// base address allow; 0 (lane by lane) for the channel multiplier's gather.
int staging_word(const void* base, int64_t channels, int64_t element, int m) {
  if (m != 1) return 0;
  for (int word : {16, 8, 4}) {
    if (word >= element && (channels * element) % word == 0 && launch::aligned(base, word)) return word;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Lanes in registers.

template <typename T, int V>
__device__ __forceinline__ void load_lanes(const T* p, at::opmath_type<T> (&v)[V]) {
  const auto pack = *reinterpret_cast<const launch::Pack<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = static_cast<at::opmath_type<T>>(pack.v[k]);
}

// The thread's first `live` lanes at out (all V as one word when vec).
template <typename scalar_t, int V, typename opmath_t>
__device__ __forceinline__ void store_lanes(scalar_t* out, const opmath_t (&acc)[V], const opmath_t (&bias)[V],
                                            int live, bool vec) {
  if (vec) {
    launch::Pack<scalar_t, V> p;
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = static_cast<scalar_t>(acc[k] + bias[k]);
    *reinterpret_cast<launch::Pack<scalar_t, V>*>(out) = p;
    return;
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (k < live) out[k] = static_cast<scalar_t>(acc[k] + bias[k]);
  }
}

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

// Lets a kernel take all of a multiprocessor's shared memory (left to itself
// the driver picked a 100 KB carve-out that held one 89 KB block) and returns
// its registers a thread.
template <typename Kernel>
int prepare(Kernel* kernel) {
  const auto* props = at::cuda::getCurrentDeviceProperties();
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(props->sharedMemPerBlockOptin)));
  C10_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  cudaFuncAttributes attributes{};
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return attributes.numRegs;
}

// Launch configurations, computed once per device, geometry and staging
// word: choosing one queries the device and scores hundreds of shapes (tens
// of microseconds on the host, as long as a small forward on the GPU).
template <typename Value>
class Memo {
 public:
  template <typename Make>
  Value get(const std::vector<int64_t>& key, Make&& make) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    Value value = make();
    const std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() >= 4096) map_.clear();  // dynamic shapes: bounded
    map_.emplace(key, value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<std::vector<int64_t>, Value> map_;
};

std::vector<int64_t> key_of(const Geometry& g, int64_t word, int64_t word2 = 0) {
  return {at::cuda::current_device(), g.batch, g.src_c, g.dst_c, g.src_h, g.src_w, g.dst_h, g.dst_w, g.kh, g.kw,
          g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.m, g.flipped, word, word2};
}

// Blocks (at most `blocks`, at least one) that share `items` with the fewest
// blocks for the same longest share.
int64_t even_share(int64_t items, int64_t blocks) {
  const int64_t per = ceil_div(items, std::clamp<int64_t>(blocks, 1, std::max<int64_t>(items, 1)));
  return ceil_div(items, per);
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

// ---------------------------------------------------------------------------
// Weight gradient.

// Rows of a tile: the most rows (at most `most`) that waste the fewest threads
// on rows past the plane's end and on idle lanes of warps.
int best_rows(int64_t height, int row_threads, int most) {
  int best_rows = 1;
  double best = -1;
  for (int rows = 1; rows <= std::max(1, most); ++rows) {
    const int threads = (rows * row_threads + 31) / 32 * 32;
    const int64_t tiles = ceil_div(height, rows);
    const double used = double(rows * row_threads) / threads * double(height) / double(tiles * rows);
    if (used >= best) {
      best = used;
      best_rows = rows;
    }
  }
  return best_rows;
}

struct WeightTiling {
  int groups, tw, krows, iblocks, jblocks, kwp, tiles_x, tiles_y, chunks;
  int64_t parts, tiles_per_part;
  int in_rows, in_cols, g_elems, buf_elems, nbuf, threads;
  size_t smem;
};

// Thread (cg, jb, il, group): lanes cg*V.., taps jb*TJ.. of kernel row
// i0 + il, and tile row `group` of every tile in the block's range. The
// block's tile rows are `groups` output rows of tw columns.
template <typename scalar_t, int TJ, bool UNIT>
__global__ void __launch_bounds__(kThreads)
    weight_grad_tile_kernel(Source<scalar_t> xs, Source<scalar_t> gs, at::opmath_type<scalar_t>* __restrict__ partial,
                            Geometry g, WeightTiling t) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = chunk_lanes<scalar_t>(), V = thread_lanes<scalar_t>(), kGroups = kLanes / V;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  scalar_t* s_bufs = reinterpret_cast<scalar_t*>(smem_raw);
  const int tid = threadIdx.x, pairs = kGroups * t.jblocks * t.krows;
  const int cg = tid % kGroups, jbk = tid / kGroups % t.jblocks, il = tid / (kGroups * t.jblocks) % t.krows;
  const int group = tid / pairs;
  const int64_t b = blockIdx.x;
  const int64_t o0 = b % t.chunks * kLanes, o = o0 + cg * V;
  const int i0 = static_cast<int>(b / t.chunks % t.iblocks) * t.krows;
  const int64_t part = b / t.chunks / t.iblocks;
  const bool computes = group < t.groups && i0 + il < g.kh && o < g.dst_c;
  const int jb = jbk * TJ;
  bool ok[TJ];
#pragma unroll
  for (int q = 0; q < TJ; ++q) ok[q] = jb + q < g.kw;
  opmath_t acc[TJ][V];
#pragma unroll
  for (int q = 0; q < TJ; ++q) {
#pragma unroll
    for (int v = 0; v < V; ++v) acc[q][v] = 0;
  }

  const int64_t tiles = g.batch * t.tiles_y * t.tiles_x;
  const int64_t k_begin = part * t.tiles_per_part, k_end = std::min(tiles, k_begin + t.tiles_per_part);
  const int64_t x_image = xs.h * xs.w * xs.channels, g_image = gs.h * gs.w * gs.channels;
  auto issue = [&](int64_t tile, scalar_t* buf) {
    const int64_t tx = tile % t.tiles_x, rest = tile / t.tiles_x, ty = rest % t.tiles_y, n = rest / t.tiles_y;
    const int64_t oy0 = ty * t.groups, ox0 = tx * t.tw;
    Source<scalar_t> s = gs;
    s.img += n * g_image;
    stage(buf, s, o0, g.dst_c, oy0, ox0, t.groups, t.tw);
    s = xs;
    s.img += n * x_image;
    stage(buf + t.g_elems, s, o0, g.dst_c, oy0 * g.sh - g.ph + int64_t(i0) * g.dh, ox0 * g.sw - g.pw, t.in_rows,
          t.in_cols);
  };
  if (k_begin < k_end) issue(k_begin, s_bufs);
  cp_async_commit();
  int it = 0;
  for (int64_t k = k_begin; k < k_end; ++k, ++it) {
    const scalar_t* cur = s_bufs + (t.nbuf == 2 ? (it & 1) * t.buf_elems : 0);
    if (t.nbuf == 2) {
      if (k + 1 < k_end) issue(k + 1, s_bufs + ((it + 1) & 1) * t.buf_elems);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    const int64_t tx = k % t.tiles_x, ty = k / t.tiles_x % t.tiles_y;
    const int live_h = static_cast<int>(std::min<int64_t>(t.groups, g.dst_h - ty * t.groups));
    const int live_w = static_cast<int>(std::min<int64_t>(t.tw, g.dst_w - tx * t.tw));
    // Outputs past the plane's edge have no gradient but read real pixels:
    // their products are skipped, not added as 0 * x.
    if (computes && group < live_h) {
      const scalar_t* grow = cur + group * t.tw * kLanes + cg * V;
      const scalar_t* xrow = cur + t.g_elems + (group * g.sh + il * g.dh) * t.in_cols * kLanes + cg * V;
      if constexpr (UNIT) {
        // win[(c + q) % TJ] holds column c + jb + q at output column c.
        opmath_t win[TJ][V];
#pragma unroll
        for (int q = 0; q + 1 < TJ; ++q) load_lanes<scalar_t, V>(xrow + (jb + q) * kLanes, win[q]);
        for (int c0 = 0; c0 < live_w; c0 += TJ) {
#pragma unroll
          for (int u = 0; u < TJ; ++u) {
            const int c = c0 + u;
            if (c < live_w) {
              load_lanes<scalar_t, V>(xrow + (c + jb + TJ - 1) * kLanes, win[(u + TJ - 1) % TJ]);
              opmath_t gv[V];
              load_lanes<scalar_t, V>(grow + c * kLanes, gv);
#pragma unroll
              for (int q = 0; q < TJ; ++q) {
                if (ok[q]) {
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[q][v] += gv[v] * win[(u + q) % TJ][v];
                }
              }
            }
          }
        }
      } else {
        for (int c = 0; c < live_w; ++c) {
          opmath_t gv[V];
          load_lanes<scalar_t, V>(grow + c * kLanes, gv);
#pragma unroll
          for (int q = 0; q < TJ; ++q) {
            if (ok[q]) {
              opmath_t xv[V];
              load_lanes<scalar_t, V>(xrow + (c * g.sw + (jb + q) * g.dw) * kLanes, xv);
#pragma unroll
              for (int v = 0; v < V; ++v) acc[q][v] += gv[v] * xv[v];
            }
          }
        }
      }
    }
    __syncthreads();
    if (t.nbuf == 1 && k + 1 < k_end) {
      issue(k + 1, s_bufs);
      cp_async_commit();
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  // The groups' sums, added in group order.
  opmath_t* s_red = reinterpret_cast<opmath_t*>(smem_raw);
  constexpr int kPer = TJ * V;
  if (group < t.groups) {
#pragma unroll
    for (int q = 0; q < TJ; ++q) {
#pragma unroll
      for (int v = 0; v < V; ++v) s_red[tid * kPer + q * V + v] = acc[q][v];
    }
  }
  __syncthreads();
  const int taps = g.kh * g.kw;
  for (int k = tid; k < pairs * kPer; k += blockDim.x) {
    opmath_t sum = 0;
    for (int gi = 0; gi < t.groups; ++gi) sum += s_red[gi * pairs * kPer + k];
    const int pair = k / kPer, q = k / V % TJ, v = k % V;
    const int64_t oc = o0 + pair % kGroups * V + v;
    const int i = i0 + pair / (kGroups * t.jblocks), j = pair / kGroups % t.jblocks * TJ + q;
    if (oc < g.dst_c && i < g.kh && j < g.kw) partial[(part * g.dst_c + oc) * taps + i * g.kw + j] = sum;
  }
}

template <typename scalar_t>
std::optional<WeightTiling> weight_tiling(const Geometry& g, int tj, bool unit) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = chunk_lanes<scalar_t>(), V = thread_lanes<scalar_t>(), kGroups = kLanes / V;
  WeightTiling t{};
  t.kwp = int(ceil_div(g.kw, tj) * tj);
  t.jblocks = t.kwp / tj;
  const int per_row = kGroups * t.jblocks;
  if (per_row > kThreads) return std::nullopt;
  t.krows = std::min(g.kh, kThreads / per_row);
  t.iblocks = int(ceil_div(g.kh, t.krows));
  t.chunks = int(ceil_div(g.dst_c, kLanes));
  const int pairs = per_row * t.krows;
  const int64_t pieces = ceil_div(g.dst_w, 32);
  t.tw = int(ceil_div(g.dst_w, pieces));
  t.tiles_x = int(pieces);
  const size_t optin = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
  auto fill = [&](int groups, int nbuf) {
    const int64_t in_rows = int64_t(groups - 1) * g.sh + int64_t(t.krows - 1) * g.dh + 1;
    const int64_t in_cols = unit ? t.tw + t.kwp - 1 : int64_t(t.tw - 1) * g.sw + int64_t(t.kwp - 1) * g.dw + 1;
    const int64_t elems = (int64_t(groups) * t.tw + in_rows * in_cols) * kLanes;
    if (elems > (int64_t(1) << 30)) return false;
    t.groups = groups;
    t.nbuf = nbuf;
    t.in_rows = int(in_rows);
    t.in_cols = int(in_cols);
    t.g_elems = groups * t.tw * kLanes;
    t.buf_elems = int(elems);
    t.threads = (pairs * groups + 31) / 32 * 32;
    const size_t red = size_t(pairs) * groups * tj * V * sizeof(opmath_t);
    t.smem = std::max(size_t(nbuf) * size_t(elems) * sizeof(scalar_t), red);
    return t.smem <= (nbuf == 2 ? std::min(kTwoBufferBudget, optin) : optin);
  };
  const int most = int(std::min<int64_t>({32, kThreads / pairs, g.dst_h}));
  const int groups = best_rows(g.dst_h, pairs, most);
  bool fits = false;
  for (int nbuf = 2; nbuf >= 1 && !fits; --nbuf) {
    for (int r = groups;; r = (r + 1) / 2) {
      if ((fits = fill(r, nbuf)) || r == 1) break;
    }
  }
  if (!fits) return std::nullopt;
  t.tiles_y = int(ceil_div(g.dst_h, t.groups));
  return t;
}

template <typename scalar_t, int TJ, bool UNIT>
std::optional<at::Tensor> run_weight_grad(const Source<scalar_t>& xs, const Source<scalar_t>& gs, const Geometry& g,
                                          const at::TensorOptions& options, cudaStream_t stream) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto kernel = weight_grad_tile_kernel<scalar_t, TJ, UNIT>;
  static Memo<std::optional<WeightTiling>> memo;
  const auto t = memo.get(key_of(g, xs.word, gs.word), [&]() -> std::optional<WeightTiling> {
    auto t = weight_tiling<scalar_t>(g, TJ, UNIT);
    if (!t) return t;
    prepare(kernel);
    const int64_t resident = launch::resident_blocks(kernel, t->threads, int64_t(t->smem));
    const int64_t tiles = g.batch * t->tiles_y * t->tiles_x;
    t->parts = even_share(tiles, resident / (int64_t(t->chunks) * t->iblocks));
    t->tiles_per_part = ceil_div(tiles, t->parts);
    return t;
  });
  if (!t) return std::nullopt;
  at::Tensor partial = at::empty({t->parts, g.dst_c, int64_t(g.kh) * g.kw}, options);
  kernel<<<grid_for(t->parts * t->chunks * t->iblocks), t->threads, t->smem, stream>>>(
      xs, gs, partial.data_ptr<opmath_t>(), g, *t);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

// Weight gradient for any geometry: a block sums one tap of one chunk over a
// contiguous range of output positions, each thread V lanes of every
// slots-th position, then a fixed-shape tree over the slots.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    direct_weight_grad_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ gout,
                              at::opmath_type<scalar_t>* __restrict__ partial, Geometry g, int64_t per_part,
                              int64_t blocks) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = chunk_lanes<scalar_t>(), V = thread_lanes<scalar_t>(), kGroups = kLanes / V;
  constexpr int kSlots = kThreads / kGroups;
  __shared__ opmath_t s_red[kThreads * V];
  const int taps = g.kh * g.kw;
  const int64_t chunks = ceil_div(g.dst_c, kLanes), positions = g.batch * g.dst_h * g.dst_w;
  const int cg = threadIdx.x % kGroups, slot = threadIdx.x / kGroups;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int tap = static_cast<int>(b % taps), i = tap / g.kw, j = tap % g.kw;
    const int64_t o = b / taps % chunks * kLanes + cg * V, part = b / taps / chunks;
    const int live = static_cast<int>(std::clamp<int64_t>(g.dst_c - o, 0, V));
    const int64_t p_end = std::min(positions, (part + 1) * per_part);
    opmath_t acc[V] = {};
    for (int64_t p = part * per_part + slot; p < p_end; p += kSlots) {
      const int64_t ox = p % g.dst_w, rest = p / g.dst_w, oy = rest % g.dst_h, n = rest / g.dst_h;
      const int64_t y = oy * g.sh - g.ph + int64_t(i) * g.dh, xx = ox * g.sw - g.pw + int64_t(j) * g.dw;
      if (y < 0 || y >= g.src_h || xx < 0 || xx >= g.src_w) continue;
      const scalar_t* px = x + ((n * g.src_h + y) * g.src_w + xx) * g.src_c;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        if (v < live) {
          acc[v] += static_cast<opmath_t>(gout[p * g.dst_c + o + v]) * static_cast<opmath_t>(px[(o + v) / g.m]);
        }
      }
    }
    __syncthreads();
#pragma unroll
    for (int v = 0; v < V; ++v) s_red[threadIdx.x * V + v] = acc[v];
    __syncthreads();
    for (int half = kSlots / 2; half > 0; half /= 2) {
      if (slot < half) {
#pragma unroll
        for (int v = 0; v < V; ++v) s_red[threadIdx.x * V + v] += s_red[(threadIdx.x + half * kGroups) * V + v];
      }
      __syncthreads();
    }
    if (slot == 0) {
      for (int v = 0; v < live; ++v) partial[(part * g.dst_c + o + v) * taps + tap] = s_red[cg * V + v];
    }
  }
}

template <typename scalar_t>
at::Tensor direct_weight_grad(const scalar_t* x, const scalar_t* gout, const Geometry& g,
                              const at::TensorOptions& options, cudaStream_t stream) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = chunk_lanes<scalar_t>();
  const int64_t taps = int64_t(g.kh) * g.kw, chunks = ceil_div(g.dst_c, kLanes);
  const int64_t positions = g.batch * g.dst_h * g.dst_w;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t parts = std::clamp<int64_t>(ceil_div(8 * sms, taps * chunks), 1, ceil_div(positions, kThreads));
  const int64_t per_part = ceil_div(positions, parts);
  auto partial = at::empty({parts, g.dst_c, taps}, options);
  const int64_t blocks = parts * chunks * taps;
  direct_weight_grad_kernel<scalar_t>
      <<<grid_for(blocks), kThreads, 0, stream>>>(x, gout, partial.data_ptr<opmath_t>(), g, per_part, blocks);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

template <typename scalar_t>
std::optional<at::Tensor> launch_weight_grad(const Source<scalar_t>& xs, const Source<scalar_t>& gs,
                                             const Geometry& g, const at::TensorOptions& options,
                                             cudaStream_t stream) {
  if (g.sw != 1 || g.dw != 1) return run_weight_grad<scalar_t, 1, false>(xs, gs, g, options, stream);
  switch (g.kw) {
    case 1:
      return run_weight_grad<scalar_t, 1, true>(xs, gs, g, options, stream);
    case 3:
      return run_weight_grad<scalar_t, 3, true>(xs, gs, g, options, stream);
    case 5:
      return run_weight_grad<scalar_t, 5, true>(xs, gs, g, options, stream);
    case 7:
      return run_weight_grad<scalar_t, 7, true>(xs, gs, g, options, stream);
    default:
      return run_weight_grad<scalar_t, 4, true>(xs, gs, g, options, stream);
  }
}

template <typename scalar_t>
Source<scalar_t> source(const at::Tensor& t, int m) {
  const scalar_t* p = t.const_data_ptr<scalar_t>();
  const int64_t element = int64_t(sizeof(scalar_t));
  return {p, t.size(2), t.size(3), t.size(1), staging_word(p, t.size(1), element, m), m};
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
      launch::with_index_type(std::max(grad_input.numel(), bp.gout.numel()), [&](auto index) {
        using index_t = decltype(index);
        direct_input_grad_kernel<scalar_t, index_t><<<grid_for(ceil_div(total, kThreads)), kThreads, 0, stream>>>(
            g, w, gin, f, static_cast<index_t>(total), vec);
      });
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

at::Tensor weight_grad(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& weight) {
  const auto& p = bp.p;
  const Geometry g = forward_geometry(p);
  const auto opmath = at::toOpMathType(p.x.scalar_type());
  if (bp.gout.numel() == 0) return at::zeros(weight.sizes(), weight.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  const auto options = p.x.options().dtype(opmath);
  columns::GradProblem c{p.x.const_data_ptr(), bp.gout.const_data_ptr(), p.x.scalar_type(), g.batch, g.dst_c,
                         g.src_h, g.src_w, g.dst_h, g.dst_w};
  c.kh = g.kh, c.kw = g.kw, c.sh = g.sh, c.sw = g.sw, c.dh = g.dh, c.dw = g.dw, c.ph = g.ph, c.pw = g.pw, c.m = g.m;
  if (auto parts = columns::weight_grad_parts(c, options, stream)) {
    return sum_parts(*parts, p.x.scalar_type(), weight.sizes());
  }
  at::Tensor partial;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_nhwc_weight_grad", [&] {
    auto tiled = launch_weight_grad(source<scalar_t>(p.x, g.m), source<scalar_t>(bp.gout, 1), g, options, stream);
    partial = tiled ? *tiled
                    : direct_weight_grad(p.x.const_data_ptr<scalar_t>(), bp.gout.const_data_ptr<scalar_t>(), g,
                                         options, stream);
  });
  return sum_parts(partial, p.x.scalar_type(), weight.sizes());
}

} // namespace customops::cuda::depthwise_nhwc
