// depthwise_conv2d on CUDA, channels_last: the weight gradient of 3x3 windows
// at row stride 1 or 2, a thread walking down a column of outputs.
//
//   dW[c, i, j] = sum over n, oy, ox of g[n, oy, ox, c] * x[n, oy*S - ph + i, ox*sw - pw + j, c]
//
// A thread owns a few lanes of a pixel's channels (16 bytes of float or
// double, 8 bytes of half types) in one output column and a run of its rows
// (half types at unit stride: an even share of the column's rows over all
// images, one image after the other, its loads running ahead across their
// edges, as in the forward's column kernel).
// For each output row it loads that row's output gradient and the three pixels
// of each input row the row is the first to read (S rows), straight from
// global memory (its neighbours read the same pixels: L1), widens each value
// once and adds it into the tap sums of every output row that input row feeds,
// whose gradients it keeps widened in a ring of registers. No shared memory
// and no barrier in the loop; the loads of the next steps are issued before
// the current one is added. A block owns a share of a pixel's channel groups
// (all of them up to 256) and as many columns as fill its threads: neighbouring
// threads own neighbouring channels, then neighbouring columns, so a warp's
// loads of a row are one contiguous run. At the end a block adds its columns'
// sums in column order and writes one part; sum_parts adds the parts in part
// order: deterministic, no atomics.
//
// The tiled weight-gradient kernel (nhwc_wgrad.cu) staged 32 bytes
// of every pixel in shared memory. On an H100 over MobileNetV2's 3x3 layer
// shapes (batch 128, channels_last, queued), ours / cuDNN, tiled -> column:
// float 1.23-1.49 -> 0.97-1.28 at unit stride, 0.84-1.34 -> 0.63-0.97 at
// stride 2; float16 1.16-1.71 -> 1.23-1.41 and 1.45-1.48 -> 1.05-1.07;
// bfloat16 1.13-1.55 -> 1.04-1.44 and 0.99-1.07 -> 0.74-0.80. The 14x14
// planes (each column's run 14 rows, its loads' first latency exposed)
// are where the column kernel gained least; walks across images took the
// half types' unit-stride ones from 1.12-1.30 to 1.04-1.19 (float16 1.05-1.28,
// bfloat16 0.88-1.30 over all unit-stride layers; same run).
#include "kernels/cuda/depthwise_conv2d/nhwc_columns.cuh"

#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/depthwise_conv2d/nhwc_columns_common.cuh"

namespace customops::cuda::depthwise_nhwc::columns {
namespace {

constexpr int kThreads = 256;
using common::fits_int;
using common::kK;
using common::lanes;
using common::widen;

template <typename scalar_t>
struct GradArgs {
  const scalar_t* x;
  const scalar_t* g;
  at::opmath_type<scalar_t>* partial;  // (gridDim.x, channels, 9)
  int64_t tasks;                       // runs: dst_w * batch * splits; walks: dst_w * walks
  int channels, groups, gpb, slots;    // groups of V lanes; a block's groups and columns
  int batch, src_h, src_w, dst_h, dst_w, sw, ph, pw;
  int rows;      // runs: output rows of a run (the last one may be shorter)
  int64_t span;  // walks: output rows a walk, over the images' rows
};

// The loads of one output row o, as stored: its output gradient and the
// three pixels of each of the S input rows S*o - ph + k (k < S) that output
// rows o and below are the first to read.
template <typename scalar_t, int V, int S>
struct StepLoads {
  launch::Pack<scalar_t, V> g, x[S][kK];
};

// S: the row stride (1 or 2). Two blocks a multiprocessor: up to 128
// registers a thread. D: steps whose loads are issued ahead of the one being
// added, so that a thread keeps D * (1 + 3 * S) loads in flight (one that
// waited for each row's loads before the next moved 27-45% of the copy
// bandwidth in float; with D = 2 the float kernel moved 94% of it on
// MobileNetV2's 144 x 56 x 56 layer, where D = 3 spilled registers and moved
// 45%). WALK: a thread walks a share of its column over the images (else it
// loops over runs of rows of one image, its loads starting afresh at each).
template <typename scalar_t, int BYTES, int S, int D, bool WALK>
__global__ void __launch_bounds__(kThreads, 2) column_weight_grad_kernel(GradArgs<scalar_t> a) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = lanes<scalar_t, BYTES>();
  constexpr int kRing = (kK - 1) / S + 1;  // output rows an input row feeds
  using Pack = launch::Pack<scalar_t, V>;
  // One tap row of every thread's sums at a time (the block's last step).
  __shared__ opmath_t s_red[kThreads * kK * V];
  const int gl = threadIdx.x % a.gpb, slot = threadIdx.x / a.gpb;
  const int group = blockIdx.y * a.gpb + gl;
  const int c = group * V;
  opmath_t acc[kK][kK][V];
#pragma unroll
  for (int i = 0; i < kK; ++i) {
#pragma unroll
    for (int j = 0; j < kK; ++j) {
#pragma unroll
      for (int v = 0; v < V; ++v) acc[i][j][v] = 0;
    }
  }

  const int64_t g_row = int64_t(a.dst_w) * a.channels, x_row = int64_t(a.src_w) * a.channels;
  // ring[m]: the output gradient of row o - m; input row S*o - ph + k feeds
  // it through tap row k + S*m. Only rows in [lo, hi) add (live).
  opmath_t ring[kRing][V] = {};
  auto add = [&](const StepLoads<scalar_t, V, S>& cur, int o, int lo, int hi, const bool (&x_ok)[kK]) {
#pragma unroll
    for (int m = kRing - 1; m > 0; --m) {
#pragma unroll
      for (int v = 0; v < V; ++v) ring[m][v] = ring[m - 1][v];
    }
    widen<scalar_t, V>(cur.g, ring[0]);
    bool live[kRing];
#pragma unroll
    for (int m = 0; m < kRing; ++m) live[m] = o - m >= lo && o - m < hi;
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const int y = S * o - a.ph + k;
      const bool y_ok = y >= 0 && y < a.src_h;
#pragma unroll
      for (int j = 0; j < kK; ++j) {
        opmath_t xv[V];
        widen<scalar_t, V>(cur.x[k][j], xv);
        const bool ok = y_ok && x_ok[j];
#pragma unroll
        for (int v = 0; v < V; ++v) {
          xv[v] = ok ? xv[v] : opmath_t(0);
#pragma unroll
          for (int m = 0; m < kRing; ++m) {
            if (k + S * m < kK && live[m]) acc[k + S * m][j][v] += ring[m][v] * xv[v];
          }
        }
      }
    }
  };
  // A pixel's column offsets, clamped into the row; x_ok: inside it.
  auto columns_of = [&](int ox, int64_t (&x_off)[kK], bool (&x_ok)[kK]) {
#pragma unroll
    for (int j = 0; j < kK; ++j) {
      const int xc = ox * a.sw - a.pw + j;
      x_ok[j] = xc >= 0 && xc < a.src_w;
      x_off[j] = int64_t(std::clamp(xc, 0, a.src_w - 1)) * a.channels;
    }
  };
  // Every load is unconditional (addresses clamped into the tensors) so that
  // it can be issued ahead; pixels outside the image count as zeros, output
  // rows outside the run add nothing.
  auto load_at = [&](const scalar_t* g_col, const scalar_t* x_img, const int64_t (&x_off)[kK], int o, int last) {
    StepLoads<scalar_t, V, S> r;
    r.g = *reinterpret_cast<const Pack*>(g_col + int64_t(std::min(o, last)) * g_row);
#pragma unroll
    for (int k = 0; k < S; ++k) {
      const int y = std::clamp(S * o - a.ph + k, 0, a.src_h - 1);
      const scalar_t* line = x_img + int64_t(y) * x_row;
#pragma unroll
      for (int j = 0; j < kK; ++j) r.x[k][j] = *reinterpret_cast<const Pack*>(line + x_off[j]);
    }
    return r;
  };

  if constexpr (WALK) {
    // One walk a thread: rows [r0, r1) of column ox over all images, one
    // image after the other, the loads running ahead across their edges.
    const int64_t item = int64_t(blockIdx.x) * a.slots + slot;
    if (slot < a.slots && group < a.groups && item < a.tasks) {
      const int ox = int(item % a.dst_w);
      const int64_t r0 = item / a.dst_w * a.span, r1 = std::min(r0 + a.span, int64_t(a.batch) * a.dst_h);
      const int n0 = int(r0 / a.dst_h), oy0 = int(r0 % a.dst_h);
      const int n_last = int((r1 - 1) / a.dst_h), end_last = int((r1 - 1) % a.dst_h) + 1;
      auto hi = [&](int n) { return n == n_last ? end_last : a.dst_h; };
      const int64_t g_image = a.dst_h * g_row, x_image = a.src_h * x_row;
      int64_t x_off[kK];
      bool x_ok[kK];
      columns_of(ox, x_off, x_ok);
      const scalar_t* ahead_g = a.g + int64_t(n0) * g_image + int64_t(ox) * a.channels + c;
      const scalar_t* ahead_x = a.x + int64_t(n0) * x_image + c;
      int ahead_n = n0, ahead_o = oy0;
      auto load = [&] {
        const int h = hi(ahead_n);
        StepLoads<scalar_t, V, S> r = load_at(ahead_g, ahead_x, x_off, ahead_o, h - 1);
        if (++ahead_o == h + kRing - 1) {
          if (ahead_n < n_last) {
            ++ahead_n, ahead_o = 0, ahead_g += g_image, ahead_x += x_image;
          } else {
            --ahead_o;
          }
        }
        return r;
      };
      StepLoads<scalar_t, V, S> ahead[D];
#pragma unroll
      for (int d = 0; d < D; ++d) ahead[d] = load();
      int n = n0, o = oy0, lo = oy0;
      while (n <= n_last) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
          const StepLoads<scalar_t, V, S> cur = ahead[d];
          ahead[d] = load();
          if (n > n_last) continue;
          const int h = hi(n);
          add(cur, o, lo, h, x_ok);
          if (++o == h + kRing - 1) ++n, o = 0, lo = 0;
        }
      }
    }
  } else if (slot < a.slots && group < a.groups) {
    for (int64_t t = int64_t(blockIdx.x) * a.slots + slot; t < a.tasks; t += int64_t(gridDim.x) * a.slots) {
      const int ox = int(t % a.dst_w);
      const int64_t rest = t / a.dst_w;
      const int n = int(rest % a.batch), oy0 = int(rest / a.batch) * a.rows;
      const int oy1 = std::min(a.dst_h, oy0 + a.rows);
      const int o_end = oy1 + kRing - 1;  // steps past the run: its last rows' lower taps
      const scalar_t* g_col = a.g + (int64_t(n) * a.dst_h * a.dst_w + ox) * a.channels + c;
      const scalar_t* x_img = a.x + int64_t(n) * a.src_h * x_row + c;
      int64_t x_off[kK];
      bool x_ok[kK];
      columns_of(ox, x_off, x_ok);
      auto load = [&](int o) { return load_at(g_col, x_img, x_off, std::min(o, o_end - 1), oy1 - 1); };
      StepLoads<scalar_t, V, S> ahead[D];
#pragma unroll
      for (int d = 0; d < D; ++d) ahead[d] = load(oy0 + d);
      for (int o0 = oy0; o0 < o_end; o0 += D) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
          const int o = o0 + d;
          const StepLoads<scalar_t, V, S> cur = ahead[d];
          ahead[d] = load(o + D);
          if (o >= o_end) continue;
          add(cur, o, oy0, oy1, x_ok);
        }
      }
    }
  }

  // The block's columns added in slot order, a tap row at a time.
  const int elems = a.gpb * kK * V;  // one tap row of the block's channel groups
  for (int i = 0; i < kK; ++i) {
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kK; ++j) {
#pragma unroll
      for (int v = 0; v < V; ++v) s_red[(threadIdx.x * kK + j) * V + v] = acc[i][j][v];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < elems; e += blockDim.x) {
      const int gi = e / (kK * V), jv = e % (kK * V);
      opmath_t sum = 0;
      for (int s = 0; s < a.slots; ++s) sum += s_red[(s * a.gpb + gi) * kK * V + jv];
      const int grp = blockIdx.y * a.gpb + gi;
      if (grp < a.groups) {
        const int j = jv / V, v = jv % V;
        a.partial[(int64_t(blockIdx.x) * a.channels + int64_t(grp) * V + v) * (kK * kK) + i * kK + j] = sum;
      }
    }
  }
}

template <typename scalar_t, int BYTES>
bool takes(const GradProblem& p) {
  constexpr int V = lanes<scalar_t, BYTES>();
  return p.kh == kK && p.kw == kK && (p.sh == 1 || p.sh == 2) && p.dh == 1 && p.dw == 1 && p.m == 1 &&
         p.sw >= 1 && p.channels % V == 0 && p.src_h > 0 && p.src_w > 0 && launch::aligned(p.x, BYTES) &&
         launch::aligned(p.gout, BYTES) && fits_int(p.batch) && fits_int(p.channels) && fits_int(p.src_h + kK) &&
         fits_int(p.src_w) && fits_int(p.dst_h + kK) && fits_int(p.dst_w) && fits_int(int64_t(p.dst_w) * p.sw + kK) &&
         std::abs(p.ph) < (1 << 20) && std::abs(p.pw) < (1 << 20);
}

template <typename scalar_t, int BYTES, int S>
at::Tensor launch(const GradProblem& p, const at::TensorOptions& options, cudaStream_t stream) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = lanes<scalar_t, BYTES>();
  // D (steps loaded ahead): about 8 loads in flight; more spilled registers.
  constexpr int D = S * BYTES >= 32 ? 1 : 2;
  // Walks across images in half types at unit stride (8-byte lanes, 5 loads a
  // step: the loads' restart at each column's top cost most there). On the
  // H100 over MobileNetV2's layers (batch 128, queued), walks / runs: float16
  // 0.92-1.00 and bfloat16 0.90-0.99 at unit stride, but 1.12-1.41 at stride 2
  // (registers spilled), float 0.98-1.05 at either stride.
  constexpr bool kWalk = BYTES == 8 && S == 1;
  auto kernel = column_weight_grad_kernel<scalar_t, BYTES, S, D, kWalk>;
  GradArgs<scalar_t> a{};
  a.x = static_cast<const scalar_t*>(p.x);
  a.g = static_cast<const scalar_t*>(p.gout);
  a.channels = int(p.channels), a.groups = int(p.channels / V);
  a.batch = int(p.batch), a.src_h = int(p.src_h), a.src_w = int(p.src_w), a.dst_h = int(p.dst_h);
  a.dst_w = int(p.dst_w), a.sw = p.sw, a.ph = p.ph, a.pw = p.pw;
  // A block: all of a pixel's channel groups up to kThreads (else even
  // shares), and as many columns as fill the rest of its threads.
  const int chunks = (a.groups + kThreads - 1) / kThreads;
  a.gpb = (a.groups + chunks - 1) / chunks;
  a.slots = kThreads / a.gpb;
  const int threads = a.slots * a.gpb;
  // Row runs: split the columns until every resident block has columns to
  // walk, runs of at least 8 rows (a run re-reads the input rows it shares
  // with the run above).
  const int64_t resident = launch::resident_blocks(kernel, threads, 0);
  if constexpr (kWalk) {
    // A walk a thread, an even share of a column's rows over all images, as
    // many as fill the resident blocks' slots (walks of at least 8 rows).
    const int64_t rows = p.batch * p.dst_h;
    const int64_t walks = std::clamp<int64_t>(std::max<int64_t>(1, resident / chunks) * a.slots / p.dst_w, 1,
                                              std::max<int64_t>(1, rows / 8));
    a.span = (rows + walks - 1) / walks;
    a.tasks = p.dst_w * ((rows + a.span - 1) / a.span);
    const int64_t parts = (a.tasks + a.slots - 1) / a.slots;
    at::Tensor partial = at::empty({parts, p.channels, kK * kK}, options);
    a.partial = partial.data_ptr<opmath_t>();
    kernel<<<dim3(unsigned(parts), unsigned(chunks)), threads, 0, stream>>>(a);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return partial;
  }
  const int64_t columns = p.batch * p.dst_w;
  const int64_t wanted = (resident * a.slots + chunks * columns - 1) / (chunks * columns);
  const int64_t splits = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, (p.dst_h + 7) / 8));
  a.rows = int((p.dst_h + splits - 1) / splits);
  a.tasks = columns * ((p.dst_h + a.rows - 1) / a.rows);
  // One wave of blocks, each looping over its columns: parts (partial sums)
  // stay few.
  const int64_t parts = std::clamp<int64_t>(resident / chunks, 1, (a.tasks + a.slots - 1) / a.slots);
  at::Tensor partial = at::empty({parts, p.channels, kK * kK}, options);
  a.partial = partial.data_ptr<opmath_t>();
  kernel<<<dim3(unsigned(parts), unsigned(chunks)), threads, 0, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

// Half types take 8 bytes a thread: with 16 (8 lanes, 72 tap sums in
// registers) the kernel spilled and took 2.3-3.3x as long as with 8.
template <typename scalar_t, int BYTES>
std::optional<at::Tensor> dispatch(const GradProblem& p, const at::TensorOptions& options, cudaStream_t stream) {
  if (!takes<scalar_t, BYTES>(p)) return std::nullopt;
  if (p.sh == 1) return launch<scalar_t, BYTES, 1>(p, options, stream);
  return launch<scalar_t, BYTES, 2>(p, options, stream);
}

} // namespace

std::optional<at::Tensor> weight_grad_parts(const GradProblem& p, const at::TensorOptions& options,
                                            cudaStream_t stream) {
  if (!enabled() || p.batch * p.dst_h * p.dst_w * p.channels == 0) return std::nullopt;
  switch (p.dtype) {
    case at::kFloat:
      return dispatch<float, 16>(p, options, stream);
    case at::kDouble:
      return dispatch<double, 16>(p, options, stream);
    case at::kHalf:
      return dispatch<at::Half, 8>(p, options, stream);
    case at::kBFloat16:
      return dispatch<at::BFloat16, 8>(p, options, stream);
    default:
      return std::nullopt;
  }
}

} // namespace customops::cuda::depthwise_nhwc::columns
