// depthwise_conv2d on CUDA, channels_last, 3x3 windows at row stride 1 or 2:
// the forward and the unit-stride input gradient (flipped taps), a thread
// walking down a column of outputs, every floating dtype.
//
// A thread owns a few lanes of a pixel's channels (16 bytes of float or
// double, 8 bytes of half types) in one output column, and walks an even
// share of that column's rows over all the images, one image after the other.
// It keeps its nine taps widened in registers for the whole walk; for each
// output row it loads the three pixels of each input row the row is the first
// to read (S rows), straight from global memory, and adds them into the sums
// of the output rows they feed, kept in a ring of registers. The loads run a
// few steps ahead of the sums, across the images' edges, into buffers that
// are each refilled right after their step is added (no copy: moving a buffer
// out before refilling it waited for its loads and left one step in flight).
// Neighbouring threads own neighbouring channels, then neighbouring columns,
// so a warp's loads of a row are one contiguous run of memory and the pixels
// its neighbours also read come from L1. No shared memory, no barriers, one
// wave of threads.
//
// Measured on an H100 over MobileNetV2's 3x3 layers (batch 128, channels_last,
// queued; timed as python -m customops.benchmark.depthwise_passes times them),
// share of the copy bandwidth, this kernel against the one before (float:
// bands of 7 rows a thread, a thread a band or a run of them; half types: the
// row-streaming kernels): float 68-99% (61-99%), float16 52-95% (32-82%),
// bfloat16 50-95% (32-82%). Walks that restarted at each image moved 4-10
// points less on the 14x14 and 7x7 planes (each restart waits for its first
// loads); runs of 8-28 rows instead of whole columns, 3-23 points less.
#include "kernels/cuda/depthwise_conv2d/nhwc_columns.cuh"

#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

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
struct Args {
  const scalar_t* src;
  const scalar_t* weight;
  const scalar_t* bias;
  scalar_t* dst;
  int64_t threads;  // groups * dst_w * walks
  int64_t span;     // output rows a walk (the last one may be shorter)
  int channels, groups, batch, src_h, src_w, dst_h, dst_w, sw, ph, pw;
  bool flipped;
};

// The loads of one step o, as stored: the three pixels of each of the S input
// rows S*o - ph + k (k < S) that output rows o and below are the first to read.
template <typename scalar_t, int V, int S>
struct RowLoads {
  launch::Pack<scalar_t, V> x[S][kK];
};

// S: the row stride (1 or 2); along a row it is a.sw. D: buffers of loads, a
// step each: D - 1 steps are in flight while one is added.
template <typename scalar_t, int BYTES, int S, int D>
__global__ void __launch_bounds__(kThreads, 2) column_corr_kernel(Args<scalar_t> a) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int V = lanes<scalar_t, BYTES>();
  constexpr int kRing = (kK - 1) / S + 1;  // output rows an input row feeds
  using Pack = launch::Pack<scalar_t, V>;
  const int64_t t = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (t >= a.threads) return;
  const int c = int(t % a.groups) * V;
  const int64_t rest = t / a.groups;
  const int ox = int(rest % a.dst_w);
  // The walk: output rows [r0, r1) of the column's rows of all images, one
  // image after the other; it ends in image n_last at row end_last.
  const int64_t r0 = rest / a.dst_w * a.span, r1 = std::min(r0 + a.span, int64_t(a.batch) * a.dst_h);
  const int n0 = int(r0 / a.dst_h), oy0 = int(r0 % a.dst_h);
  const int n_last = int((r1 - 1) / a.dst_h), end_last = int((r1 - 1) % a.dst_h) + 1;

  opmath_t w[kK][kK][V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const scalar_t* taps = a.weight + int64_t(c + v) * kK * kK;
#pragma unroll
    for (int i = 0; i < kK * kK; ++i) {
      w[i / kK][i % kK][v] = static_cast<opmath_t>(taps[a.flipped ? kK * kK - 1 - i : i]);
    }
  }
  // Each output's sum starts from its bias.
  opmath_t bv[V];
#pragma unroll
  for (int v = 0; v < V; ++v) bv[v] = a.bias != nullptr ? static_cast<opmath_t>(a.bias[c + v]) : opmath_t(0);

  const int64_t src_row = int64_t(a.src_w) * a.channels, dst_row = int64_t(a.dst_w) * a.channels;
  const int64_t src_image = a.src_h * src_row, dst_image = a.dst_h * dst_row;
  // An image's steps run kRing - 1 rows past its last output row (that row's lower taps).
  auto stop = [&](int n) { return (n == n_last ? end_last : a.dst_h) + kRing - 1; };
  const scalar_t* src = a.src + c;
  scalar_t* out = a.dst + int64_t(ox) * a.channels + c;
  // Every load is unconditional (addresses clamped into the image, the walk's
  // last step repeated past its end) so that it can be issued ahead; pixels
  // outside the image count as zeros.
  int x_off[kK];  // takes() keeps a row's elements within int
  bool x_ok[kK];
#pragma unroll
  for (int j = 0; j < kK; ++j) {
    const int xc = ox * a.sw - a.pw + j;
    x_ok[j] = xc >= 0 && xc < a.src_w;
    x_off[j] = std::clamp(xc, 0, a.src_w - 1) * a.channels;
  }
  auto load = [&](const scalar_t* image, int o) {
    RowLoads<scalar_t, V, S> r;
#pragma unroll
    for (int i = 0; i < S; ++i) {
      const scalar_t* line = image + int64_t(std::clamp(S * o - a.ph + i, 0, a.src_h - 1)) * src_row;
#pragma unroll
      for (int j = 0; j < kK; ++j) r.x[i][j] = *reinterpret_cast<const Pack*>(line + x_off[j]);
    }
    return r;
  };
  // ring[m]: the sums of output row o - m; input row S*o - ph + k feeds it
  // through tap row k + S*m. Rows outside the walk (those of the image before,
  // at the start of each image) are summed and not stored.
  opmath_t ring[kRing][V] = {};
  // The loads run ahead of the sums across the images' edges; past the walk's
  // end they repeat its last step.
  const scalar_t* ahead_image = src + int64_t(n0) * src_image;
  int ahead_n = n0, ahead_o = oy0;
  auto advance = [&] {
    if (++ahead_o < stop(ahead_n)) return;
    if (ahead_n < n_last) {
      ++ahead_n, ahead_o = 0, ahead_image += src_image;
    } else {
      --ahead_o;
    }
  };
  RowLoads<scalar_t, V, S> ahead[D];
#pragma unroll
  for (int d = 0; d < D; ++d) {
    ahead[d] = load(ahead_image, ahead_o);
    advance();
  }
  // The step being added: row o of image n, whose rows from lo are the walk's.
  int n = n0, o = oy0, lo = oy0;
  scalar_t* out_image = out + int64_t(n0) * dst_image;
  while (n <= n_last) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      // Added from its buffer, which then takes the loads of the step D
      // ahead: copying the buffer out first would wait for those loads.
      if (n <= n_last) {
        const RowLoads<scalar_t, V, S>& cur = ahead[d];
#pragma unroll
        for (int m = kRing - 1; m > 0; --m) {
#pragma unroll
          for (int v = 0; v < V; ++v) ring[m][v] = ring[m - 1][v];
        }
#pragma unroll
        for (int v = 0; v < V; ++v) ring[0][v] = bv[v];
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
                if (k + S * m < kK) ring[m][v] += w[k + S * m][j][v] * xv[v];
              }
            }
          }
        }
        const int q = o - (kRing - 1);  // the row this step completes
        const int end = stop(n);
        if (q >= lo && q < end - (kRing - 1)) {
          Pack pack;
#pragma unroll
          for (int v = 0; v < V; ++v) pack.v[v] = static_cast<scalar_t>(ring[kRing - 1][v]);
          *reinterpret_cast<Pack*>(out_image + int64_t(q) * dst_row) = pack;
        }
        if (++o == end) ++n, o = 0, lo = 0, out_image += dst_image;
      }
      ahead[d] = load(ahead_image, ahead_o);
      advance();
    }
  }
}

// Half types with fewer than 64 channels (a pixel under 128 bytes) stay with
// the row kernels: at 32 channels (MobileNetV2's first layer) this kernel
// moved 70-74% of the copy bandwidth, they 82%.
template <typename scalar_t, int BYTES>
bool takes(const Problem& p) {
  constexpr int V = lanes<scalar_t, BYTES>();
  return p.kh == kK && p.kw == kK && p.dh == 1 && p.dw == 1 && p.m == 1 && (p.sh == 1 || p.sh == 2) &&
         (BYTES == 16 || p.channels * int64_t(sizeof(scalar_t)) >= 128) && p.sw >= 1 && p.channels % V == 0 && p.src_h > 0 && p.src_w > 0 && launch::aligned(p.src, BYTES) &&
         launch::aligned(p.dst, BYTES) && fits_int(p.batch) && fits_int(p.channels) && fits_int(p.src_h + kK) &&
         fits_int(p.src_w) && fits_int(p.dst_h + kK) && fits_int(p.dst_w) && fits_int(int64_t(p.dst_w) * p.sw + kK) &&
         fits_int(p.src_w * p.channels) && std::abs(p.ph) < (1 << 20) && std::abs(p.pw) < (1 << 20);
}

template <typename scalar_t, int BYTES, int S, int D>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr int V = lanes<scalar_t, BYTES>();
  auto kernel = column_corr_kernel<scalar_t, BYTES, S, D>;
  Args<scalar_t> a{};
  a.src = static_cast<const scalar_t*>(p.src);
  a.weight = static_cast<const scalar_t*>(p.weight);
  a.bias = static_cast<const scalar_t*>(p.bias);
  a.dst = static_cast<scalar_t*>(p.dst);
  a.channels = int(p.channels), a.groups = int(p.channels / V), a.batch = int(p.batch);
  a.src_h = int(p.src_h), a.src_w = int(p.src_w), a.dst_h = int(p.dst_h), a.dst_w = int(p.dst_w);
  a.sw = p.sw, a.ph = p.ph, a.pw = p.pw, a.flipped = p.flipped;
  // One wave of threads (fewer where walks would be shorter than 8 rows: a
  // walk re-reads the input rows it shares with the one before). Each walks
  // an even share of its column's rows over all images, one image after the
  // other.
  const int64_t resident = launch::resident_blocks(kernel, kThreads, 0) * kThreads;
  const int64_t columns = int64_t(a.groups) * a.dst_w, rows = p.batch * p.dst_h;
  const int64_t walks = std::clamp<int64_t>(resident / columns, 1, std::max<int64_t>(1, rows / 8));
  a.span = (rows + walks - 1) / walks;
  a.threads = columns * ((rows + a.span - 1) / a.span);
  kernel<<<unsigned((a.threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// D, the buffers of loads (D - 1 steps in flight while one is added), as
// measured on the H100 over the layers above: 16-byte lanes 3 at unit stride
// (2 within 1%; 4 went past 128 registers, 55-74% of the copy bandwidth) and
// 2 at stride 2 (3 spilled: 77-80% where 2 moved 94-99%); half types 4 at
// unit stride (3: 1-4 points less but on the 7x7 plane) and 3 at stride 2
// (2: 1-2 points less).
template <typename scalar_t, int BYTES>
bool dispatch(const Problem& p, cudaStream_t stream) {
  if (!takes<scalar_t, BYTES>(p)) return false;
  constexpr bool kWide = BYTES == 16;
  if (p.sh == 1) {
    launch<scalar_t, BYTES, 1, kWide ? 3 : 4>(p, stream);
  } else {
    launch<scalar_t, BYTES, 2, kWide ? 2 : 3>(p, stream);
  }
  return true;
}

} // namespace

bool enabled() {
  const char* algo = std::getenv("CUSTOMOPS_DEPTHWISE_ALGO");
  return algo == nullptr || std::strcmp(algo, "rows") != 0;
}

bool run(const Problem& p, cudaStream_t stream) {
  if (p.batch * p.dst_h * p.dst_w * p.channels == 0) return false;
  switch (p.dtype) {
    case at::kFloat:
      return dispatch<float, 16>(p, stream);
    case at::kDouble:
      return dispatch<double, 16>(p, stream);
    case at::kHalf:
      return dispatch<at::Half, 8>(p, stream);
    case at::kBFloat16:
      return dispatch<at::BFloat16, 8>(p, stream);
    default:
      return false;
  }
}

} // namespace customops::cuda::depthwise_nhwc::columns
