// depthwise_conv2d on CUDA, channels_last, 3x3 windows in float and double:
// a thread walks down a column of outputs.
//
// A thread owns 16 bytes of a pixel's channels (4 floats, 2 doubles) in one
// output column and a run of bands of kR output rows. It keeps its channels'
// nine taps in registers for all its bands, loads the (kR-1)*S + 3 input rows
// a band reads, three pixels of each, straight from global memory, and adds
// each row into the accumulators of the outputs it feeds. Neighbouring
// threads own neighbouring channels, then neighbouring columns, so a warp's
// loads of a row are one contiguous run of memory and the pixels its
// neighbours also read come from L1. No shared memory and no barriers.
//
// Measured on an H100 over MobileNet's 3x3 layer shapes at batch 64-128,
// queued (python -m customops.benchmark.depthwise_passes has the row kernels
// beside it): the float forward moved 60-100% of the copy bandwidth where the
// row-streaming kernels moved 41-86% (their staging and per-step barriers cost
// more than a 3x3 window's nine products). Half types stay with the row
// kernels: variants of this kernel tried while writing it moved 43-53% with
// 8-byte loads, 31-71% with 16-byte loads (8 lanes, taps kept packed and
// widened at each product to fit the registers), the row kernels 32-82%.
#include "kernels/cuda/depthwise_conv2d_nhwc_columns.cuh"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/cuda/launch.cuh"

namespace customops::cuda::depthwise_nhwc::columns {
namespace {

constexpr int kThreads = 256;
constexpr int kK = 3;  // window height and width
constexpr int kR = 7;  // output rows a band: divides MobileNet's 112, 56, 28, 14 and 7

// A thread's lanes: 16 bytes of a pixel (4 floats, 2 doubles).
template <typename scalar_t>
constexpr int lanes() {
  return 16 / int(sizeof(scalar_t));
}

template <typename scalar_t>
struct Args {
  const scalar_t* src;
  const scalar_t* weight;
  const scalar_t* bias;
  scalar_t* dst;
  int64_t items;  // batch * dst_w * channels / V: a thread each (times the splits)
  int channels, src_h, src_w, dst_h, dst_w, sw, ph, pw;
  int bands, per;  // bands of kR rows down the plane; a thread's run of them
  bool flipped;
};

// The V lanes at p, or zeros where p is null (outside the image).
template <typename scalar_t, int V>
__device__ __forceinline__ void load_lanes(const scalar_t* p, scalar_t (&v)[V]) {
  if (p == nullptr) {
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = 0;
    return;
  }
  const auto pack = *reinterpret_cast<const launch::Pack<scalar_t, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = pack.v[k];
}

// S: the stride down the rows (1 or 2); along a row it is a.sw. Two blocks a
// multiprocessor (128 registers a thread) moved 60-97% of the copy bandwidth
// in float over the shapes above; one block (184 registers) 47-98%, three (80
// registers, spilling) 41-78%.
template <typename scalar_t, int S>
__global__ void __launch_bounds__(kThreads, 2) column_corr_kernel(Args<scalar_t> a) {
  constexpr int V = lanes<scalar_t>();
  constexpr int kRows = (kR - 1) * S + kK;
  const int64_t item = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (item >= a.items) return;
  const int groups = a.channels / V;
  const int c = int(item % groups) * V;
  const int64_t rest = item / groups;
  const int ox = int(rest % a.dst_w);
  const int64_t n = rest / a.dst_w;

  scalar_t w[kK][kK][V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const scalar_t* taps = a.weight + int64_t(c + v) * kK * kK;
#pragma unroll
    for (int t = 0; t < kK * kK; ++t) w[t / kK][t % kK][v] = taps[a.flipped ? kK * kK - 1 - t : t];
  }
  scalar_t bv[V];
#pragma unroll
  for (int v = 0; v < V; ++v) bv[v] = a.bias != nullptr ? a.bias[c + v] : scalar_t(0);

  const int64_t src_row = int64_t(a.src_w) * a.channels, dst_row = int64_t(a.dst_w) * a.channels;
  const scalar_t* img = a.src + n * a.src_h * src_row + c;
  int64_t xoff[kK];
  bool xok[kK];
#pragma unroll
  for (int j = 0; j < kK; ++j) {
    const int x = ox * a.sw - a.pw + j;
    xok[j] = x >= 0 && x < a.src_w;
    xoff[j] = int64_t(x) * a.channels;
  }
  scalar_t* out = a.dst + (n * a.dst_h * a.dst_w + ox) * int64_t(a.channels) + c;

  const int b_end = std::min(a.bands, int(blockIdx.y + 1) * a.per);
  for (int b = blockIdx.y * a.per; b < b_end; ++b) {
    const int oy0 = b * kR, y0 = oy0 * S - a.ph;
    scalar_t acc[kR][V];
#pragma unroll
    for (int q = 0; q < kR; ++q) {
#pragma unroll
      for (int v = 0; v < V; ++v) acc[q][v] = 0;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int y = y0 + r;
      const bool yok = y >= 0 && y < a.src_h;
      const scalar_t* row = img + int64_t(y) * src_row;
      scalar_t xv[kK][V];
#pragma unroll
      for (int j = 0; j < kK; ++j) load_lanes<scalar_t, V>(yok && xok[j] ? row + xoff[j] : nullptr, xv[j]);
#pragma unroll
      for (int q = 0; q < kR; ++q) {
        const int i = r - q * S;  // the tap row that input row r is for output row q
        if (i >= 0 && i < kK) {
#pragma unroll
          for (int j = 0; j < kK; ++j) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc[q][v] += w[i][j][v] * xv[j][v];
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kR; ++q) {
      if (oy0 + q < a.dst_h) {
        launch::Pack<scalar_t, V> pack;
#pragma unroll
        for (int v = 0; v < V; ++v) pack.v[v] = acc[q][v] + bv[v];
        *reinterpret_cast<launch::Pack<scalar_t, V>*>(out + int64_t(oy0 + q) * dst_row) = pack;
      }
    }
  }
}

bool fits_int(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int>::max() / 4;
}

template <typename scalar_t>
bool takes(const Problem& p) {
  constexpr int V = lanes<scalar_t>();
  constexpr size_t kBytes = V * sizeof(scalar_t);
  return p.kh == kK && p.kw == kK && p.dh == 1 && p.dw == 1 && p.m == 1 && (p.sh == 1 || p.sh == 2) &&
         p.sw >= 1 && p.channels % V == 0 && launch::aligned(p.src, kBytes) && launch::aligned(p.dst, kBytes) &&
         fits_int(p.channels) && fits_int(p.src_h) && fits_int(p.src_w) && fits_int(p.dst_h) &&
         fits_int(p.dst_w) && fits_int(int64_t(p.dst_w) * p.sw + kK) && std::abs(p.ph) < (1 << 20) &&
         std::abs(p.pw) < (1 << 20) && p.batch * p.dst_w * (p.channels / V) < (int64_t(1) << 38);
}

// Splits of the bands among threads: enough threads to fill the device once
// (each loads its taps, 36 scalar loads, so no more than that).
template <typename scalar_t, int S>
void launch(const Problem& p, cudaStream_t stream) {
  constexpr int V = lanes<scalar_t>();
  auto kernel = column_corr_kernel<scalar_t, S>;
  Args<scalar_t> a{static_cast<const scalar_t*>(p.src),
                   static_cast<const scalar_t*>(p.weight),
                   static_cast<const scalar_t*>(p.bias),
                   static_cast<scalar_t*>(p.dst),
                   p.batch * p.dst_w * (p.channels / V),
                   int(p.channels),
                   int(p.src_h),
                   int(p.src_w),
                   int(p.dst_h),
                   int(p.dst_w),
                   p.sw,
                   p.ph,
                   p.pw,
                   int((p.dst_h + kR - 1) / kR),
                   1,
                   p.flipped};
  const int64_t resident = launch::resident_blocks(kernel, kThreads, 0) * kThreads;
  const int64_t wanted = std::clamp<int64_t>((resident + a.items - 1) / a.items, 1, a.bands);
  a.per = int(std::max<int64_t>((a.bands + wanted - 1) / wanted, (a.bands + 65534) / 65535));
  const int64_t splits = (a.bands + a.per - 1) / a.per;
  const dim3 grid(unsigned((a.items + kThreads - 1) / kThreads), unsigned(splits));
  kernel<<<grid, kThreads, 0, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
      if (!takes<float>(p)) return false;
      p.sh == 1 ? launch<float, 1>(p, stream) : launch<float, 2>(p, stream);
      return true;
    case at::kDouble:
      if (!takes<double>(p)) return false;
      p.sh == 1 ? launch<double, 1>(p, stream) : launch<double, 2>(p, stream);
      return true;
    default:
      return false;
  }
}

} // namespace customops::cuda::depthwise_nhwc::columns
