#include "kernels/upsample.h"
#include "kernels/cuda/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace customops::cuda {
namespace {

using upsample::Axis;
using upsample::Plan;

using launch::aligned;
using launch::blocks_for;
using launch::kThreads;
using launch::Pack;
using launch::widest;
using launch::with_index_type;

// NCHW: each thread writes VEC consecutive outputs of one row, as one store.
// Its two source rows are shared with the neighbouring threads, so the
// gathered loads hit in L1; the kernel is bound by the stores.
template <typename scalar_t, typename index_t, int VEC>
__global__ void __launch_bounds__(kThreads) forward_nchw_kernel(
    const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, index_t total, index_t IH, index_t IW,
    index_t OH, index_t OW, Axis<at::opmath_type<scalar_t>> ay, Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  const index_t groups = OW / VEC;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t xg = idx % groups, row = idx / groups;
    const index_t oy = row % OH, plane = row / OH;
    index_t y0, y1;
    opmath_t wy0, wy1;
    ay.taps(oy, y0, y1, wy0, wy1);
    const scalar_t* r0 = src + (plane * IH + y0) * IW;
    const scalar_t* r1 = src + (plane * IH + y1) * IW;
    Pack<scalar_t, VEC> p;
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      index_t x0, x1;
      opmath_t wx0, wx1;
      ax.taps(xg * VEC + v, x0, x1, wx0, wx1);
      const opmath_t top = wx0 * static_cast<opmath_t>(r0[x0]) + wx1 * static_cast<opmath_t>(r0[x1]);
      const opmath_t bottom = wx0 * static_cast<opmath_t>(r1[x0]) + wx1 * static_cast<opmath_t>(r1[x1]);
      p.v[v] = static_cast<scalar_t>(wy0 * top + wy1 * bottom);
    }
    *reinterpret_cast<Pack<scalar_t, VEC>*>(dst + row * OW + xg * VEC) = p;
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
// Input pixel (iy, ix) receives sum_a sum_b wy(a) wx(b) g[a][b] over the
// output rows a and columns b that read it. Each thread owns one input pixel
// and sums in a fixed order, so results are bit-identical run to run.

constexpr int kTileX = 32, kTileY = 8, kMaxReaders = 8;

// A tile of kTileY x kTileX input pixels of one plane. The readers of its
// columns and rows (ranges and weights) are found once per tile into shared
// memory instead of once per pixel; each thread then reads at most
// kMaxReaders^2 gradients, mostly from L1.
template <typename scalar_t, typename index_t>
__global__ void __launch_bounds__(kTileX* kTileY) backward_tiled_kernel(
    const scalar_t* __restrict__ grad, scalar_t* __restrict__ dst, index_t IH, index_t IW, index_t OH, index_t OW,
    index_t tiles_x, index_t tiles_y, Axis<at::opmath_type<scalar_t>> ay, Axis<at::opmath_type<scalar_t>> ax) {
  using opmath_t = at::opmath_type<scalar_t>;
  __shared__ index_t x_lo[kTileX], y_lo[kTileY];
  __shared__ int x_count[kTileX], y_count[kTileY];
  __shared__ opmath_t x_w[kMaxReaders][kTileX], y_w[kTileY][kMaxReaders];

  const index_t tile = blockIdx.x;
  const index_t tx = tile % tiles_x, rest = tile / tiles_x;
  const index_t ty = rest % tiles_y, plane = rest / tiles_y;
  const index_t ix0 = tx * kTileX, iy0 = ty * kTileY;
  const int lx = threadIdx.x, ly = threadIdx.y;

  if (ly == 0) {
    const index_t ix = ix0 + lx;
    if (ix < IW) {
      const index_t lo = ax.first_at_least(ix - 1), count = ax.first_at_least(ix + 1) - lo;
      CUDA_KERNEL_ASSERT(count <= kMaxReaders);
      x_lo[lx] = lo;
      x_count[lx] = static_cast<int>(count);
      for (int k = 0; k < count; ++k) x_w[k][lx] = ax.weight(lo + k, ix);
    }
  } else if (ly == 1 && lx < kTileY) {
    const index_t iy = iy0 + lx;
    if (iy < IH) {
      const index_t lo = ay.first_at_least(iy - 1), count = ay.first_at_least(iy + 1) - lo;
      CUDA_KERNEL_ASSERT(count <= kMaxReaders);
      y_lo[lx] = lo;
      y_count[lx] = static_cast<int>(count);
      for (int k = 0; k < count; ++k) y_w[lx][k] = ay.weight(lo + k, iy);
    }
  }
  __syncthreads();

  const index_t ix = ix0 + lx, iy = iy0 + ly;
  if (ix >= IW || iy >= IH) return;
  const scalar_t* g = grad + (plane * OH + y_lo[ly]) * OW + x_lo[lx];
  const int ny = y_count[ly], nx = x_count[lx];
  opmath_t acc = 0;
  for (int a = 0; a < ny; ++a) {
    const scalar_t* row = g + a * OW;
    opmath_t part = 0;
    for (int b = 0; b < nx; ++b) part += x_w[b][lx] * static_cast<opmath_t>(row[b]);
    acc += y_w[ly][a] * part;
  }
  dst[(plane * IH + iy) * IW + ix] = static_cast<scalar_t>(acc);
}

// Any ratio and either layout: each thread finds its own readers. Used for
// channels_last and for upsampling by more than about 3x per axis, where a
// pixel may have more than kMaxReaders readers.
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

// Most outputs that can read one input index along an axis: those whose
// source lies in [i-1, i+1), plus those clamped to 0 (half_pixel).
template <typename opmath_t>
int64_t max_readers(const Axis<opmath_t>& a) {
  if (a.scale == opmath_t(0)) return a.out;
  return std::min<int64_t>(a.out, static_cast<int64_t>(std::floor(2.5 / static_cast<double>(a.scale))) + 2);
}

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
    const int64_t n = p.output.numel();
    if (p.channels_last) {
      const bool vec = p.C % kVec == 0 && aligned(src, sizeof(scalar_t) * kVec);
      const int64_t total = vec ? n / kVec : n;
      auto kernel = vec ? forward_nhwc_kernel<scalar_t, index_t, kVec> : forward_nhwc_kernel<scalar_t, index_t, 1>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, dst, total, p.C, p.in_h, p.in_w, p.out_h, p.out_w,
                                                         ay, ax);
    } else {
      const bool vec = p.out_w % kVec == 0;
      const int64_t total = vec ? n / kVec : n;
      auto kernel = vec ? forward_nchw_kernel<scalar_t, index_t, kVec> : forward_nchw_kernel<scalar_t, index_t, 1>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, dst, total, p.in_h, p.in_w, p.out_h, p.out_w, ay,
                                                         ax);
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
    const bool tiled = !p.channels_last && max_readers(ay) <= kMaxReaders && max_readers(ax) <= kMaxReaders;
    if (tiled) {
      const int64_t tiles_x = (IW + kTileX - 1) / kTileX, tiles_y = (IH + kTileY - 1) / kTileY;
      const int64_t blocks = p.N * p.C * tiles_x * tiles_y;
      TORCH_CHECK(blocks < std::numeric_limits<int32_t>::max(),
                  "customops::upsample_bilinear2d_backward: grad_in too large (", blocks, " tiles)");
      backward_tiled_kernel<scalar_t, index_t><<<static_cast<unsigned>(blocks), dim3(kTileX, kTileY), 0, stream>>>(
          grad, dst, IH, IW, OH, OW, tiles_x, tiles_y, ay, ax);
    } else {
      const int64_t total = p.output.numel();
      auto kernel = p.channels_last ? backward_any_kernel<scalar_t, index_t, true>
                                    : backward_any_kernel<scalar_t, index_t, false>;
      kernel<<<blocks_for(total), kThreads, 0, stream>>>(grad, dst, total, p.C, IH, IW, OH, OW, ay, ax);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace

at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode) {
  const c10::cuda::CUDAGuard guard(input.device());
  const auto plan = upsample::plan_forward(input, output_size, mode);
  if (plan.output.numel() == 0) return plan.output;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "upsample_bilinear2d_cuda",
                                  [&] { forward<scalar_t>(plan); });
  return plan.output;
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                        c10::string_view mode) {
  const c10::cuda::CUDAGuard guard(grad_out.device());
  const auto plan = upsample::plan_backward(grad_out, input_size, mode);
  if (plan.output.numel() == 0) return plan.output;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_out.scalar_type(),
                                  "upsample_bilinear2d_backward_cuda", [&] { backward<scalar_t>(plan); });
  return plan.output;
}

} // namespace customops::cuda
