#include "kernels/fold.h"
#include "kernels/cuda/common/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include "kernels/cuda/common/device_guard.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace customops::cuda {
namespace {

using launch::blocks_for;
using launch::kThreads;
using launch::Pack;
using launch::with_index_type;

// One thread per (n, c, VEC consecutive windows): it writes those windows'
// kh*kw entries, VEC at a time (16 or 8 bytes) into each output row. Consecutive
// threads take consecutive windows, so every store coalesces into full lines,
// and the index divisions are paid once per VEC*kh*kw outputs.
template <typename scalar_t, typename index_t, int VEC>
__global__ void im2col_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, index_t total,
                              index_t H, index_t W, index_t oh, index_t ow, fold::Window w64) {
  const index_t kh = w64.kh, kw = w64.kw, dh = w64.dh, dw = w64.dw;
  const index_t L = oh * ow, groups = L / VEC;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t l0 = idx % groups * VEC, nc = idx / groups;
    index_t h0[VEC], x0[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      h0[v] = (l0 + v) / ow * index_t(w64.sh) - index_t(w64.ph);
      x0[v] = (l0 + v) % ow * index_t(w64.sw) - index_t(w64.pw);
    }
    const scalar_t* plane = src + nc * H * W;
    scalar_t* out = dst + nc * kh * kw * L + l0;
    for (index_t i = 0; i < kh; ++i) {
      for (index_t j = 0; j < kw; ++j) {
        Pack<scalar_t, VEC> p;
#pragma unroll
        for (int v = 0; v < VEC; ++v) {
          const index_t h = h0[v] + i * dh, x = x0[v] + j * dw;
          p.v[v] = (h >= 0 && h < H && x >= 0 && x < W) ? plane[h * W + x] : scalar_t(0);
        }
        *reinterpret_cast<Pack<scalar_t, VEC>*>(out + (i * kw + j) * L) = p;
      }
    }
  }
}

// Each thread gathers, for OUT neighbouring pixels of one output row, the window
// entries that cover them, in a fixed (i, j) order: deterministic, no atomics.
// The OUT loads of a tap are independent, so they are in flight together; with
// one pixel a thread, each load waited for the one before. Window rows move
// away from the pixel as i grows, so that loop stops at the first before 0;
// with unit stride every origin is a window, and the divisibility tests drop out.
template <typename scalar_t, typename index_t, bool kUnitStride, int OUT>
__global__ void col2im_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, index_t total,
                              index_t H, index_t W, index_t oh, index_t ow, fold::Window w64) {
  using opmath_t = at::opmath_type<scalar_t>;
  const index_t kh = w64.kh, kw = w64.kw, dh = w64.dh, dw = w64.dw, sh = w64.sh, sw = w64.sw;
  const index_t L = oh * ow, groups = (W + OUT - 1) / OUT;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t x0 = idx % groups * OUT, hn = idx / groups;
    const index_t h = hn % H, nc = hn / H;
    const scalar_t* planes = src + nc * kh * kw * L;
    opmath_t acc[OUT];
#pragma unroll
    for (int v = 0; v < OUT; ++v) acc[v] = opmath_t(0);
    for (index_t i = 0; i < kh; ++i) {
      const index_t hy = h + index_t(w64.ph) - i * dh;
      if (hy < 0) break;
      if (!kUnitStride && hy % sh != 0) continue;
      const index_t y = kUnitStride ? hy : hy / sh;
      if (y >= oh) continue;
      const scalar_t* row = planes + i * kw * L + y * ow;
#pragma unroll 3
      for (index_t j = 0; j < kw; ++j) {
        const index_t wx0 = x0 + index_t(w64.pw) - j * dw;
        bool ok[OUT];
        scalar_t val[OUT];
#pragma unroll
        for (int v = 0; v < OUT; ++v) {
          const index_t wx = wx0 + v;
          ok[v] = wx >= 0 && x0 + v < W && (kUnitStride || wx % sw == 0);
          const index_t xo = kUnitStride ? wx : wx / sw;
          ok[v] = ok[v] && xo < ow;
          val[v] = ok[v] ? row[j * L + xo] : scalar_t(0);
        }
#pragma unroll
        for (int v = 0; v < OUT; ++v) {
          if (ok[v]) acc[v] += static_cast<opmath_t>(val[v]);
        }
      }
    }
    scalar_t* out = dst + hn * W + x0;
#pragma unroll
    for (int v = 0; v < OUT; ++v) {
      if (x0 + v < W) out[v] = static_cast<scalar_t>(acc[v]);
    }
  }
}

// The largest value of the kernels' window arithmetic: a window's rows and
// columns (y * stride - padding + i * dilation) lie within the padded input,
// stride and dilation * (kernel - 1) are index_t values of their own. 32-bit
// indexing must fit it too: chosen from the element counts alone, index_t(w64.sh)
// and the like truncated a huge stride or padding. (Past int32, the terms are
// returned as they are: 64-bit indexing either way, and no sum to overflow.)
int64_t window_extent(const fold::Plan& plan) {
  const auto& w = plan.w;
  const int64_t most = std::max({w.sh, w.sw, w.ph, w.pw, w.dh * (w.kh - 1), w.dw * (w.kw - 1)});
  if (most > std::numeric_limits<int32_t>::max()) return most;
  return std::max({most, plan.H + 2 * w.ph, plan.W + 2 * w.pw});
}

} // namespace

void im2col_into(const fold::Plan& plan) {
  const at::Tensor& x = plan.input;
  const at::Tensor& out = plan.output;
  const int64_t windows = plan.N * plan.C * plan.out_h * plan.out_w;
  if (windows == 0) return;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "im2col_cuda", [&] {
    with_index_type(std::max({x.numel(), out.numel(), window_extent(plan)}), [&](auto index) {
      using index_t = decltype(index);
      // 16- or 8-byte stores where every row's length allows them.
      constexpr int kWide = launch::widest<scalar_t>();
      constexpr int kNarrow = sizeof(scalar_t) >= 8 ? 1 : 8 / sizeof(scalar_t);
      const int64_t L = plan.out_h * plan.out_w;
      const int vec = L % kWide == 0 ? kWide : L % kNarrow == 0 ? kNarrow : 1;
      const int64_t total = windows / vec;
      auto kernel = vec == kWide     ? im2col_kernel<scalar_t, index_t, kWide>
                    : vec == kNarrow ? im2col_kernel<scalar_t, index_t, kNarrow>
                                     : im2col_kernel<scalar_t, index_t, 1>;
      kernel<<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          x.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), total, plan.H, plan.W, plan.out_h, plan.out_w,
          plan.w);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

void col2im_into(const fold::Plan& plan) {
  const at::Tensor& cols = plan.input;
  const at::Tensor& out = plan.output;
  if (out.numel() == 0) return;
  const bool unit_stride = plan.w.sh == 1 && plan.w.sw == 1;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, cols.scalar_type(), "col2im_cuda", [&] {
    with_index_type(std::max({cols.numel(), out.numel(), window_extent(plan)}), [&](auto index) {
      using index_t = decltype(index);
      // 8 pixels a thread for half types, 4 otherwise (measured on an H100:
      // 8 beat 4 by 5% in float16, 1 took 2.3x as long as 8).
      constexpr int kOut = std::max(4, launch::widest<scalar_t>());
      const int64_t total = plan.N * plan.C * plan.H * ((plan.W + kOut - 1) / kOut);
      auto kernel = unit_stride ? col2im_kernel<scalar_t, index_t, true, kOut>
                                : col2im_kernel<scalar_t, index_t, false, kOut>;
      kernel<<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          cols.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), total, plan.H, plan.W, plan.out_h,
          plan.out_w, plan.w);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  const KernelGuard guard(input.device());
  const auto plan = fold::plan_im2col(input, kernel_size, dilation, padding, stride);
  im2col_into(plan);
  return plan.output;
}

at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const KernelGuard guard(input.device());
  const auto plan = fold::plan_col2im(input, output_size, kernel_size, dilation, padding, stride);
  col2im_into(plan);
  return plan.output;
}

} // namespace customops::cuda
