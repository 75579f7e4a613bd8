// depthwise_conv2d on CUDA, channels_last: the weight gradient (nhwc.cu's first
// comment describes the NHWC kernels; nhwc_common.cuh holds what the two files
// share). 3x3 windows at row stride 1 or 2 take the column kernel
// (nhwc_column_wgrad.cu). Otherwise a block owns 32 bytes of each pixel's
// channels and a band of kernel rows, and sums the products of a contiguous
// range of tiles of output positions (thread: V lanes, one kernel row, TJ taps,
// one row of each tile, sliding as nhwc.cu's correlations do); the block's row
// groups are added in group order and the blocks' partial sums in order
// (sum_parts): deterministic, no atomics.
#include "kernels/cuda/depthwise_conv2d/nhwc.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/depthwise_conv2d/common.cuh"
#include "kernels/cuda/depthwise_conv2d/nhwc_columns.cuh"
#include "kernels/cuda/depthwise_conv2d/nhwc_common.cuh"

namespace customops::cuda::depthwise_nhwc {
namespace {

// ---------------------------------------------------------------------------
// Weight gradient.

// Blocks (at most `blocks`, at least one) that share `items` with the fewest
// blocks for the same longest share.
int64_t even_share(int64_t items, int64_t blocks) {
  const int64_t per = ceil_div(items, std::clamp<int64_t>(blocks, 1, std::max<int64_t>(items, 1)));
  return ceil_div(items, per);
}

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

} // namespace

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
