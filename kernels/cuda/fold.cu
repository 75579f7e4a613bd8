#include "kernels/fold.h"
#include "kernels/cuda/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

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
// kh*kw entries, VEC at a time (8 bytes) into each output row. Consecutive
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

// One thread per output pixel, gathering the window entries that cover it in a
// fixed order: deterministic, no atomics. Window origins move away from the
// pixel as i and j grow, so the loops stop at the first origin before 0; with
// unit stride every origin is a window, and the divisibility tests drop out.
template <typename scalar_t, typename index_t, bool kUnitStride>
__global__ void col2im_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, index_t total,
                              index_t H, index_t W, index_t oh, index_t ow, fold::Window w64) {
  using opmath_t = at::opmath_type<scalar_t>;
  const index_t kh = w64.kh, kw = w64.kw, dh = w64.dh, dw = w64.dw, sh = w64.sh, sw = w64.sw;
  const index_t L = oh * ow;
  for (index_t idx = blockIdx.x * index_t(blockDim.x) + threadIdx.x; idx < total;
       idx += index_t(gridDim.x) * blockDim.x) {
    const index_t x = idx % W, hn = idx / W;
    const index_t h = hn % H, nc = hn / H;
    const scalar_t* planes = src + nc * kh * kw * L;
    opmath_t acc = 0;
    for (index_t i = 0; i < kh; ++i) {
      const index_t hy = h + index_t(w64.ph) - i * dh;
      if (hy < 0) break;
      if (!kUnitStride && hy % sh != 0) continue;
      const index_t y = kUnitStride ? hy : hy / sh;
      if (y >= oh) continue;
      const scalar_t* row = planes + i * kw * L + y * ow;
      for (index_t j = 0; j < kw; ++j) {
        const index_t wx = x + index_t(w64.pw) - j * dw;
        if (wx < 0) break;
        if (!kUnitStride && wx % sw != 0) continue;
        const index_t xo = kUnitStride ? wx : wx / sw;
        if (xo < ow) acc += static_cast<opmath_t>(row[j * L + xo]);
      }
    }
    dst[idx] = static_cast<scalar_t>(acc);
  }
}

} // namespace

void im2col_into(const fold::Plan& plan) {
  const at::Tensor& x = plan.input;
  const at::Tensor& out = plan.output;
  const int64_t windows = plan.N * plan.C * plan.out_h * plan.out_w;
  if (windows == 0) return;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "im2col_cuda", [&] {
    with_index_type(std::max(x.numel(), out.numel()), [&](auto index) {
      using index_t = decltype(index);
      // 8-byte stores where every row's length allows them.
      constexpr int kVec = sizeof(scalar_t) >= 8 ? 1 : 8 / sizeof(scalar_t);
      const bool packed = kVec > 1 && (plan.out_h * plan.out_w) % kVec == 0;
      const int64_t total = packed ? windows / kVec : windows;
      auto kernel = packed ? im2col_kernel<scalar_t, index_t, kVec> : im2col_kernel<scalar_t, index_t, 1>;
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
  const int64_t total = out.numel();
  if (total == 0) return;
  const bool unit_stride = plan.w.sh == 1 && plan.w.sw == 1;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, cols.scalar_type(), "col2im_cuda", [&] {
    with_index_type(std::max(cols.numel(), out.numel()), [&](auto index) {
      using index_t = decltype(index);
      auto kernel = unit_stride ? col2im_kernel<scalar_t, index_t, true> : col2im_kernel<scalar_t, index_t, false>;
      kernel<<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          cols.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), total, plan.H, plan.W, plan.out_h,
          plan.out_w, plan.w);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  const c10::cuda::CUDAGuard guard(input.device());
  const auto plan = fold::plan_im2col(input, kernel_size, dilation, padding, stride);
  im2col_into(plan);
  return plan.output;
}

at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const c10::cuda::CUDAGuard guard(input.device());
  const auto plan = fold::plan_col2im(input, output_size, kernel_size, dilation, padding, stride);
  col2im_into(plan);
  return plan.output;
}

} // namespace customops::cuda
