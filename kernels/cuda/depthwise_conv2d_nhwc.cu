// depthwise_conv2d on CUDA, channels_last (NHWC in memory).
//
// In NHWC the channels of a pixel are contiguous, so the kernels work on
// chunks of channels: 32 bytes of a pixel (16 half, 8 float or 4 double
// lanes), one memory sector. A block owns one chunk and walks tiles of output
// pixels. Each tile's input (its rows and columns plus the window's halo, all
// lanes of the chunk) is staged into shared memory in the same pixel-major
// layout, with cp.async where the chunk's words are aligned so that the next
// tile loads while this one computes (two buffers), and zeros outside the
// image. A thread then owns V lanes (4, or 2 doubles) and a strip of kS
// neighbouring outputs of a row: for each kernel row it slides over the
// kS + TJ - 1 staged columns of a tap block, so each staged value it reads
// feeds up to TJ taps. Taps are staged once per block as opmath, blocked by TJ
// (the kernel width for 1, 3, 5, 7; blocks of 4 otherwise, the missing taps
// skipped, never multiplied as zeros: 0 * inf would make a NaN).
//
// Forward: output channel o reads input channel o / m. Input gradient at unit
// stride with m == 1: the same correlation over grad_out with flipped taps and
// padding (k-1)*d - p. Other input gradients, and windows whose tiles would not
// fit in shared memory, take direct kernels (one thread per pixel and V lanes,
// a fixed order of taps). Weight gradient: a block sums, for its chunk and a
// band of kernel rows, the products of a contiguous range of tiles (thread:
// V lanes, one kernel row, TJ taps, one row of each tile, sliding as above);
// the block's row groups are added in group order and the blocks' partial sums
// by at::sum: deterministic, no atomics.
#include "kernels/cuda/depthwise_conv2d_nhwc.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "kernels/cuda/launch.cuh"

namespace customops::cuda::depthwise_nhwc {
namespace {

constexpr int kS = 7;            // outputs per thread along a row (odd: see corr_tiling)
constexpr int kMaxStrips = 8;    // strips of kS outputs per tile row
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
// Correlation (forward, and the unit-stride input gradient): tiles of `rows`
// output rows by strips_x * kS columns.

struct CorrTiling {
  int strips_x, rows, tiles_x, tiles_y, chunks;
  int in_rows, in_cols, kwp;  // staged source rows and columns; kernel width padded to TJ
  int tile_elems, w_bytes, nbuf, threads;
  size_t smem;
};

// UNIT: unit stride and dilation along rows, where a thread's kS outputs share
// their staged columns.
template <typename scalar_t, int TJ, bool UNIT>
__global__ void __launch_bounds__(kThreads, 2)
    corr_tile_kernel(Source<scalar_t> src, const scalar_t* __restrict__ weight, const scalar_t* __restrict__ bias,
                     scalar_t* __restrict__ dst, Geometry g, CorrTiling t) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = chunk_lanes<scalar_t>(), V = thread_lanes<scalar_t>(), kGroups = kLanes / V;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  opmath_t* s_w = reinterpret_cast<opmath_t*>(smem_raw);
  scalar_t* s_tiles = reinterpret_cast<scalar_t*>(smem_raw + t.w_bytes);
  const int tid = threadIdx.x;
  const int cg = tid % kGroups, sx = tid / kGroups % t.strips_x, r = tid / (kGroups * t.strips_x);
  const int64_t o0 = int64_t(blockIdx.x % t.chunks) * kLanes, o = o0 + cg * V;
  const int taps = g.kh * g.kw;

  for (int k = tid; k < g.kh * t.kwp * kLanes; k += blockDim.x) {
    const int lane = k % kLanes, tap = k / kLanes, i = tap / t.kwp, j = tap % t.kwp;
    const int64_t oc = o0 + lane;
    opmath_t v = 0;
    if (j < g.kw && oc < g.dst_c) {
      const int idx = g.flipped ? (g.kh - 1 - i) * g.kw + (g.kw - 1 - j) : i * g.kw + j;
      v = static_cast<opmath_t>(weight[oc * taps + idx]);
    }
    s_w[k] = v;
  }
  opmath_t bv[V];
#pragma unroll
  for (int k = 0; k < V; ++k) bv[k] = bias != nullptr && o + k < g.dst_c ? static_cast<opmath_t>(bias[o + k]) : 0;
  const int live_lanes = static_cast<int>(std::clamp<int64_t>(g.dst_c - o, 0, V));
  const bool vec_store = g.dst_c % V == 0;

  const int tw = t.strips_x * kS;
  const int64_t tiles = g.batch * t.tiles_y * t.tiles_x, step = gridDim.x / t.chunks;
  const int64_t image = src.h * src.w * src.channels;
  auto issue = [&](int64_t tile, scalar_t* buf) {
    const int64_t tx = tile % t.tiles_x, rest = tile / t.tiles_x, ty = rest % t.tiles_y, n = rest / t.tiles_y;
    Source<scalar_t> s = src;
    s.img += n * image;
    stage(buf, s, o0, g.dst_c, ty * t.rows * g.sh - g.ph, tx * tw * g.sw - g.pw, t.in_rows, t.in_cols);
  };
  int64_t k = blockIdx.x / t.chunks;
  if (k < tiles) issue(k, s_tiles);
  cp_async_commit();
  for (int it = 0; k < tiles; k += step, ++it) {
    const int64_t next = k + step;
    const scalar_t* cur = s_tiles + (t.nbuf == 2 ? (it & 1) * t.tile_elems : 0);
    if (t.nbuf == 2) {
      if (next < tiles) issue(next, s_tiles + ((it + 1) & 1) * t.tile_elems);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // the tile (and the taps) are in shared memory

    const int64_t tx = k % t.tiles_x, rest = k / t.tiles_x, ty = rest % t.tiles_y, n = rest / t.tiles_y;
    const int64_t oy = ty * t.rows + r, ox = tx * tw + sx * kS;
    if (r < t.rows && oy < g.dst_h && ox < g.dst_w && live_lanes > 0) {
      opmath_t acc[kS][V];
#pragma unroll
      for (int s = 0; s < kS; ++s) {
#pragma unroll
        for (int v = 0; v < V; ++v) acc[s][v] = 0;
      }
      const scalar_t* base = cur + (r * g.sh * t.in_cols + sx * kS * g.sw) * kLanes + cg * V;
      for (int i = 0; i < g.kh; ++i) {
        const scalar_t* row = base + i * g.dh * t.in_cols * kLanes;
        const opmath_t* wrow = s_w + i * t.kwp * kLanes + cg * V;
        for (int jb = 0; jb < t.kwp; jb += TJ) {
          opmath_t wv[TJ][V];
          bool ok[TJ];
#pragma unroll
          for (int q = 0; q < TJ; ++q) {
            load_lanes<opmath_t, V>(wrow + (jb + q) * kLanes, wv[q]);
            ok[q] = jb + q < g.kw;
          }
          if constexpr (UNIT) {
#pragma unroll
            for (int c = 0; c < kS + TJ - 1; ++c) {
              opmath_t xv[V];
              load_lanes<scalar_t, V>(row + (jb + c) * kLanes, xv);
#pragma unroll
              for (int s = 0; s < kS; ++s) {
                const int q = c - s;
                if (q >= 0 && q < TJ && ok[q]) {
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[s][v] += wv[q][v] * xv[v];
                }
              }
            }
          } else {
#pragma unroll
            for (int s = 0; s < kS; ++s) {
#pragma unroll
              for (int q = 0; q < TJ; ++q) {
                if (ok[q]) {
                  opmath_t xv[V];
                  load_lanes<scalar_t, V>(row + (s * g.sw + (jb + q) * g.dw) * kLanes, xv);
#pragma unroll
                  for (int v = 0; v < V; ++v) acc[s][v] += wv[q][v] * xv[v];
                }
              }
            }
          }
        }
      }
      scalar_t* out = dst + ((n * g.dst_h + oy) * g.dst_w + ox) * g.dst_c + o;
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        if (ox + s < g.dst_w) store_lanes<scalar_t, V>(out + s * g.dst_c, acc[s], bv, live_lanes, vec_store);
      }
    }
    __syncthreads();  // the buffer is consumed before it is staged again
    if (t.nbuf == 1 && next < tiles) {
      issue(next, s_tiles);
      cp_async_commit();
    }
  }
}

size_t align16(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

// Rows of a tile: the most rows (at most kThreads threads a block) that waste
// the fewest threads on rows past the plane's end and on idle lanes of warps.
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

// The tiling of a correlation, or none when even one row of tile with one
// buffer would not fit in shared memory (the direct kernel runs then). kS is
// odd so that the strips of a warp start in different banks: a quarter-warp's
// four strips read 32-byte pixels kS apart.
template <typename scalar_t>
std::optional<CorrTiling> corr_tiling(const Geometry& g, int tj, bool unit) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = chunk_lanes<scalar_t>(), kGroups = kLanes / thread_lanes<scalar_t>();
  CorrTiling t{};
  t.chunks = int(ceil_div(g.dst_c, kLanes));
  t.kwp = int(ceil_div(g.kw, tj) * tj);
  const int64_t strips = ceil_div(g.dst_w, kS);
  t.tiles_x = int(ceil_div(strips, kMaxStrips));
  t.strips_x = int(ceil_div(strips, t.tiles_x));
  const int row_threads = kGroups * t.strips_x;
  const int tw = t.strips_x * kS;
  const size_t w_bytes = align16(size_t(g.kh) * t.kwp * kLanes * sizeof(opmath_t));
  const size_t optin = at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin;
  auto fill = [&](int rows, int nbuf) {
    const int64_t in_rows = int64_t(rows - 1) * g.sh + int64_t(g.kh - 1) * g.dh + 1;
    const int64_t in_cols = unit ? tw + t.kwp - 1 : int64_t(tw - 1) * g.sw + int64_t(t.kwp - 1) * g.dw + 1;
    const int64_t elems = in_rows * in_cols * kLanes;
    const size_t smem = w_bytes + size_t(nbuf) * size_t(elems) * sizeof(scalar_t);
    if (elems > (int64_t(1) << 30)) return false;
    t.rows = rows;
    t.nbuf = nbuf;
    t.in_rows = int(in_rows);
    t.in_cols = int(in_cols);
    t.tile_elems = int(elems);
    t.w_bytes = int(w_bytes);
    t.smem = smem;
    return smem <= (nbuf == 2 ? std::min(kTwoBufferBudget, optin) : optin);
  };
  const int rows = best_rows(g.dst_h, row_threads, kThreads / row_threads);
  bool fits = false;
  for (int nbuf = 2; nbuf >= 1 && !fits; --nbuf) {
    for (int r = rows;; r = (r + 1) / 2) {
      if ((fits = fill(r, nbuf)) || r == 1) break;
    }
  }
  if (!fits) return std::nullopt;
  t.tiles_y = int(ceil_div(g.dst_h, t.rows));
  t.threads = (row_threads * t.rows + 31) / 32 * 32;
  return t;
}

// Blocks of the persistent kernels that the device holds at once: a grid of
// at most that many runs in one wave (a block more would double the time).
template <typename Kernel>
int64_t resident_blocks(Kernel* kernel, int threads, size_t smem) {
  if (smem > 48 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  int per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return int64_t(std::max(per_sm, 1)) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

// Blocks (at most `blocks`, at least one) that share `items` with the fewest
// blocks for the same longest share.
int64_t even_share(int64_t items, int64_t blocks) {
  const int64_t per = ceil_div(items, std::clamp<int64_t>(blocks, 1, std::max<int64_t>(items, 1)));
  return ceil_div(items, per);
}

template <typename scalar_t, int TJ, bool UNIT>
bool run_corr(const Source<scalar_t>& src, const scalar_t* weight, const scalar_t* bias, scalar_t* dst,
              const Geometry& g, cudaStream_t stream) {
  const auto t = corr_tiling<scalar_t>(g, TJ, UNIT);
  if (!t) return false;
  auto kernel = corr_tile_kernel<scalar_t, TJ, UNIT>;
  const int64_t resident = resident_blocks(kernel, t->threads, t->smem);
  const int64_t tiles = g.batch * t->tiles_y * t->tiles_x;
  const int64_t per_chunk = even_share(tiles, resident / t->chunks);
  kernel<<<grid_for(t->chunks * per_chunk), t->threads, t->smem, stream>>>(src, weight, bias, dst, g, *t);
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
// gathers the output gradients whose windows read it. g is the forward
// geometry (src = input, dst = output).
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads)
    direct_input_grad_kernel(const scalar_t* __restrict__ gout, const scalar_t* __restrict__ weight,
                             scalar_t* __restrict__ gin, Geometry g, int64_t total) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = thread_lanes<scalar_t>();
  const int64_t groups = ceil_div(g.src_c, V);
  const int taps = g.kh * g.kw;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = idx % groups * V, pix = idx / groups;
    const int64_t x = pix % g.src_w, rest = pix / g.src_w, y = rest % g.src_h, n = rest / g.src_h;
    const int live = static_cast<int>(std::min<int64_t>(V, g.src_c - c));
    opmath_t acc[V] = {}, zero[V] = {};
    for (int i = 0; i < g.kh; ++i) {
      const int64_t ty = y + g.ph - int64_t(i) * g.dh;
      if (ty < 0) break;
      if (ty % g.sh != 0 || ty / g.sh >= g.dst_h) continue;
      for (int j = 0; j < g.kw; ++j) {
        const int64_t tx = x + g.pw - int64_t(j) * g.dw;
        if (tx < 0) break;
        if (tx % g.sw != 0 || tx / g.sw >= g.dst_w) continue;
        const scalar_t* pg = gout + ((n * g.dst_h + ty / g.sh) * g.dst_w + tx / g.sw) * g.dst_c;
        for (int t = 0; t < g.m; ++t) {
#pragma unroll
          for (int v = 0; v < V; ++v) {
            if (v < live) {
              const int64_t oc = (c + v) * g.m + t;
              acc[v] += static_cast<opmath_t>(weight[oc * taps + i * g.kw + j]) * static_cast<opmath_t>(pg[oc]);
            }
          }
        }
      }
    }
    store_lanes<scalar_t, V>(gin + pix * g.src_c + c, acc, zero, live, false);
  }
}

// ---------------------------------------------------------------------------
// Weight gradient.

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
  auto t = weight_tiling<scalar_t>(g, TJ, UNIT);
  if (!t) return std::nullopt;
  auto kernel = weight_grad_tile_kernel<scalar_t, TJ, UNIT>;
  const int64_t resident = resident_blocks(kernel, t->threads, t->smem);
  const int64_t tiles = g.batch * t->tiles_y * t->tiles_x;
  t->parts = even_share(tiles, resident / (int64_t(t->chunks) * t->iblocks));
  t->tiles_per_part = ceil_div(tiles, t->parts);
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

} // namespace

void forward(const conv::DepthwisePlan& p) {
  if (p.out.numel() == 0) return;
  const Geometry g = forward_geometry(p);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_nhwc", [&] {
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* b = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* out = p.out.data_ptr<scalar_t>();
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
      done = launch_corr(source<scalar_t>(bp.gout, 1), w, static_cast<const scalar_t*>(nullptr), gin, t, stream);
    }
    if (!done) {
      const int64_t total = grad_input.numel() / p.s.C * ceil_div(p.s.C, thread_lanes<scalar_t>());
      direct_input_grad_kernel<scalar_t><<<grid_for(ceil_div(total, kThreads)), kThreads, 0, stream>>>(
          bp.gout.const_data_ptr<scalar_t>(), w, gin, f, total);
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
  at::Tensor partial;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_nhwc_weight_grad", [&] {
    const auto options = p.x.options().dtype(opmath);
    auto tiled = launch_weight_grad(source<scalar_t>(p.x, g.m), source<scalar_t>(bp.gout, 1), g, options, stream);
    partial = tiled ? *tiled
                    : direct_weight_grad(p.x.const_data_ptr<scalar_t>(), bp.gout.const_data_ptr<scalar_t>(), g,
                                         options, stream);
  });
  return partial.sum(0).to(p.x.scalar_type()).view(weight.sizes());
}

} // namespace customops::cuda::depthwise_nhwc
