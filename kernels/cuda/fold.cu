#include "kernels/fold.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

namespace customops::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 30));
}

// One thread per (n, c, window): it writes that window's kh*kw entries, one per
// output row. Consecutive threads take consecutive windows, so every store
// coalesces, and the index divisions are paid once per kh*kw outputs.
template <typename scalar_t>
__global__ void im2col_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, int64_t total,
                              int64_t C, int64_t H, int64_t W, int64_t oh, int64_t ow, fold::Window w) {
  const int64_t L = oh * ow;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = idx % L, nc = idx / L;
    const int64_t h0 = l / ow * w.sh - w.ph, x0 = l % ow * w.sw - w.pw;
    const scalar_t* plane = src + nc * H * W;
    scalar_t* out = dst + nc * w.kh * w.kw * L + l;
#pragma unroll 4
    for (int64_t i = 0; i < w.kh; ++i) {
      const int64_t h = h0 + i * w.dh;
      const bool row_in = h >= 0 && h < H;
      for (int64_t j = 0; j < w.kw; ++j) {
        const int64_t x = x0 + j * w.dw;
        out[(i * w.kw + j) * L] = (row_in && x >= 0 && x < W) ? plane[h * W + x] : scalar_t(0);
      }
    }
  }
}

// One thread per output pixel, gathering the window entries that cover it in a
// fixed order: deterministic, no atomics.
template <typename scalar_t>
__global__ void col2im_kernel(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, int64_t total,
                              int64_t C, int64_t H, int64_t W, int64_t oh, int64_t ow, fold::Window w) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t L = oh * ow;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t x = idx % W, h = idx / W % H, nc = idx / (W * H);
    const scalar_t* planes = src + nc * w.kh * w.kw * L;
    opmath_t acc = 0;
    for (int64_t i = 0; i < w.kh; ++i) {
      const int64_t hy = h + w.ph - i * w.dh;
      if (hy < 0 || hy % w.sh != 0 || hy / w.sh >= oh) continue;
      for (int64_t j = 0; j < w.kw; ++j) {
        const int64_t wx = x + w.pw - j * w.dw;
        if (wx < 0 || wx % w.sw != 0 || wx / w.sw >= ow) continue;
        acc += static_cast<opmath_t>(planes[(i * w.kw + j) * L + hy / w.sh * ow + wx / w.sw]);
      }
    }
    dst[idx] = static_cast<scalar_t>(acc);
  }
}

} // namespace

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  const c10::cuda::CUDAGuard guard(input.device());
  const auto plan = fold::plan_im2col(input, kernel_size, dilation, padding, stride);
  const at::Tensor& x = plan.input;
  const at::Tensor& out = plan.output;
  const fold::Window& w = plan.w;
  const int64_t N = plan.N, C = plan.C, H = plan.H, W = plan.W, oh = plan.out_h, ow = plan.out_w;
  const int64_t total = N * C * oh * ow;  // one thread per (n, c, window)
  if (total == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "im2col_cuda", [&] {
    im2col_kernel<<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), total, C, H, W, oh, ow, w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const c10::cuda::CUDAGuard guard(input.device());
  const auto plan = fold::plan_col2im(input, output_size, kernel_size, dilation, padding, stride);
  const at::Tensor& cols = plan.input;
  const at::Tensor& out = plan.output;
  const fold::Window& w = plan.w;
  const int64_t C = plan.C, H = plan.H, W = plan.W, oh = plan.out_h, ow = plan.out_w;
  const int64_t total = out.numel();
  if (total == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, cols.scalar_type(), "col2im_cuda", [&] {
    col2im_kernel<<<blocks_for(total), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        cols.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), total, C, H, W, oh, ow, w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

} // namespace customops::cuda
