// conv2d of few-channel images on the tensor cores: the weight gradient, in float16 and bfloat16
// (`stem_weight_grad`) and in TF32 (`stem_weight_grad_tf32`), as float32 partial sums per block that
// sum_weight_partials (partials.cu) adds in a fixed order and rounds once. stem.cu's first comment describes the stem
// kernels; stem_common.cuh holds what their files share.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/partials.h"
#include "kernels/cuda/conv2d/stem.h"
#include "kernels/cuda/conv2d/stem_common.cuh"

namespace customops::cuda::stem {
namespace {
// The weight gradients' walk: for each output tile this block takes (grid-stride over the batch's tiles), copies
// the tile's grad_out pixels into dy, kChunks 16-byte chunks of the block's slice of channels a pixel (chunk j of
// pixel q at j ^ swizzle(q); zeros outside the image and past K: their products vanish), and its input window,
// then calls fn().
template <typename T, int kCP, int kChunks, typename Swizzle, typename Fn>
__device__ __forceinline__ void for_each_weight_grad_tile(uint4* dy, Padded<T, kCP>* window, const T* __restrict__ x,
                                                          const T* __restrict__ gout, const Params& p, int k0,
                                                          Swizzle swizzle, Fn&& fn) {
  constexpr int kPer = 16 / int(sizeof(T));  // channels a chunk
  const int kchunks = min(kChunks, (p.K - k0 + kPer - 1) / kPer);
  const int tiles_q = (p.OW + kTileQ - 1) / kTileQ, tiles_p = (p.OH + kTileP - 1) / kTileP;
  const int64_t tiles = p.N * tiles_p * tiles_q;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int ow0 = int(tile % tiles_q) * kTileQ, oh0 = int(tile / tiles_q % tiles_p) * kTileP;
    const int64_t n = tile / tiles_q / tiles_p;
    __syncthreads();  // the previous tile is read
    for (int i = threadIdx.x; i < kTileP * kTileQ * kChunks; i += kThreads) {
      const int pix = i / kChunks, j = i % kChunks;
      const int oh = oh0 + pix / kTileQ, ow = ow0 + pix % kTileQ;
      const bool ok = oh < p.OH && ow < p.OW && j < kchunks;
      const T* src = ok ? gout + ((n * p.OH + oh) * p.OW + ow) * p.K + k0 + j * kPer : gout;
      sm80::copy16(dy + pix * kChunks + (j ^ swizzle(pix)), src, ok);
    }
    copy_window<T, kCP>(window, x, p, n, oh0, ow0);
    sm80::copies_done();
    __syncthreads();
    fn();
  }
}

// partial[blockIdx.x][k][c][r][s] for the block's output-channel slice.
template <typename T, int kCP>
__global__ void __launch_bounds__(kThreads, 2)
    stem_weight_grad(const T* __restrict__ x, const T* __restrict__ gout, float* __restrict__ partial, Params p) {
  extern __shared__ uint4 smem[];
  const int k0 = blockIdx.y * kSliceK;
  uint4* dy = smem;  // [tile pixel][chunk ^ (pixel % 8)]: ldmatrix.trans reads 8 pixels' same chunk
  auto* window = reinterpret_cast<Padded<T, kCP>*>(dy + kTileP * kTileQ * kNB);
  const uint32_t dy_base = sm80::smem_address(dy), window_base = sm80::smem_address(window);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row_bytes = p.slots * kCP * int(sizeof(T));
  const int items = p.R * p.steps;
  // ldmatrix.x4.trans of A (16 run elements x 16 pixels): lanes 0-7 address pixels 0-7 at elements 0-7, lanes
  // 8-15 pixels 0-7 at elements 8-15, lanes 16-31 the same for pixels 8-15.
  const int a_offset = ((lane % 8 + 8 * (lane / 16)) * p.stride_w * kCP + 8 * (lane / 8 % 2)) * int(sizeof(T));
  float acc[kMaxItems][kNB][4] = {};
  const auto swizzle = [](int pix) { return pix % 8; };
  for_each_weight_grad_tile<T, kCP, kNB>(dy, window, x, gout, p, k0, swizzle, [&] {
    for (int i = 0; i < kTileP; ++i) {
      // B (16 pixels x 8 channels) of column blocks 2m and 2m + 1: lanes 0-15 address pixels 0-15 at chunk 2m,
      // lanes 16-31 at chunk 2m + 1.
      uint32_t b[kNB / 2][4];
      const int dpix = i * kTileQ + lane % 16;
#pragma unroll
      for (int m = 0; m < kNB / 2; ++m) {
        sm80::ldmatrix_x4<true>(b[m], dy_base + (dpix * kNB + ((2 * m + lane / 16) ^ (dpix % 8))) * 16);
      }
#pragma unroll
      for (int it = 0; it < kMaxItems; ++it) {
        const int item = warp + it * kWarps;
        if (item >= items) continue;
        const int r = item / p.steps, step = item % p.steps;
        uint32_t a[4];
        sm80::ldmatrix_x4<true>(a, window_base + (i * p.stride_h + r * p.dil_h) * row_bytes + a_offset +
                                 step * 16 * int(sizeof(T)));
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) {
          sm80::mma_16x8x16<T>(acc[it][nb], a, b[nb / 2][2 * (nb % 2)], b[nb / 2][2 * (nb % 2) + 1]);
        }
      }
    }
  });
  // Accumulator {0, 1}: run element step * 16 + lane / 4, channels nb * 8 + 2 * (lane % 4) + {0, 1}; {2, 3}: + 8.
  float* dst = partial + int64_t(blockIdx.x) * p.K * p.C * p.R * p.S;
#pragma unroll
  for (int it = 0; it < kMaxItems; ++it) {
    const int item = warp + it * kWarps;
    if (item >= items) continue;
    const int r = item / p.steps, step = item % p.steps;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int e = step * 16 + lane / 4 + 8 * h, s = e / kCP, c = e % kCP;
      if (e >= p.run || c >= p.C) continue;
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int k = k0 + nb * 8 + 2 * (lane % 4) + j;
          if (k < p.K) dst[((int64_t(k) * p.C + c) * p.R + r) * p.S + s] = acc[it][nb][2 * h + j];
        }
      }
    }
  }
}

// The weight gradient in TF32 (float32): ldmatrix.trans moves 16-bit elements only, so the fragments come from
// plain shared-memory loads, and two permutations make those loads wide. The MMA's N index g of column block nb
// stands for output channel g * 8 + nb, so a lane's B words for the 8 column blocks are 8 consecutive channels of
// one pixel (two 16-byte loads); its M index m stands for run element 2 * m (m < 8) or 2 * (m - 8) + 1, so a
// lane's a0/a1 (rows g, g + 8) are two consecutive elements (one 8-byte load). The MMA's reduction (K = 8) is 8
// pixels of a tile row, two MMAs per 16. grad_out's pixels sit in shared memory as 16 chunks of 4 channels, chunk
// j of pixel q at j ^ tf32_swizzle(q): the 8 lanes of a 16-byte load's phase read two chunks (2g + c for two g)
// of each of 4 pixels, which the swizzle (XOR by 0, 1, 4 or 5) spreads over all 32 banks.
__device__ __forceinline__ int tf32_swizzle(int pixel) {
  return (pixel & 1) | ((pixel & 2) << 1);
}

template <int kCP>
__global__ void __launch_bounds__(kThreads, 2)
    stem_weight_grad_tf32(const float* __restrict__ x, const float* __restrict__ gout, float* __restrict__ partial,
                          Params p) {
  constexpr int kChunks = kSliceK / 4;
  extern __shared__ uint4 smem[];
  const int k0 = blockIdx.y * kSliceK;
  uint4* dy = smem;  // [tile pixel][chunk ^ tf32_swizzle(pixel)]
  auto* window = reinterpret_cast<Padded<float, kCP>*>(dy + kTileP * kTileQ * kChunks);
  const float* dyf = reinterpret_cast<const float*>(dy);
  const float* windowf = reinterpret_cast<const float*>(window);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row_elems = p.slots * kCP;
  const int items = p.R * p.steps;
  float acc[kMaxItems][kNB][4] = {};
  for_each_weight_grad_tile<float, kCP, kChunks>(dy, window, x, gout, p, k0, tf32_swizzle, [&] {
    for (int i = 0; i < kTileP; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // pixels 8 * half + {t, t + 4} of the tile row
        // b[h][nb]: channel g * 8 + nb of pixel 8 * half + t + 4 * h, rounded (copied as they are).
        uint32_t b[2][kNB];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int pix = i * kTileQ + 8 * half + t + 4 * h;
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int chunk = pix * kChunks + ((2 * g + c) ^ tf32_swizzle(pix));
            const float4 v = *reinterpret_cast<const float4*>(dyf + chunk * 4);
            b[h][4 * c] = sm80::to_tf32(v.x);
            b[h][4 * c + 1] = sm80::to_tf32(v.y);
            b[h][4 * c + 2] = sm80::to_tf32(v.z);
            b[h][4 * c + 3] = sm80::to_tf32(v.w);
          }
        }
#pragma unroll
        for (int it = 0; it < kMaxItems; ++it) {
          const int item = warp + it * kWarps;
          if (item >= items) continue;
          const int r = item / p.steps, step = item % p.steps;
          // Elements step * 16 + 2 * g + {0, 1} of pixels 8 * half + t and + 4 (already rounded in the window).
          const float* a_at = windowf + (i * p.stride_h + r * p.dil_h) * row_elems +
                              (8 * half + t) * p.stride_w * kCP + step * 16 + 2 * g;
          const float2 lo = *reinterpret_cast<const float2*>(a_at);
          const float2 hi = *reinterpret_cast<const float2*>(a_at + 4 * p.stride_w * kCP);
          const uint32_t a[4] = {__float_as_uint(lo.x), __float_as_uint(lo.y), __float_as_uint(hi.x),
                                 __float_as_uint(hi.y)};
#pragma unroll
          for (int nb = 0; nb < kNB; ++nb) sm80::mma_16x8x8_tf32(acc[it][nb], a, b[0][nb], b[1][nb]);
        }
      }
    }
  });
  // Accumulator {0, 1}: run element step * 16 + 2 * g, channels (2 * t + {0, 1}) * 8 + nb; {2, 3}: element + 1.
  float* dst = partial + int64_t(blockIdx.x) * p.K * p.C * p.R * p.S;
#pragma unroll
  for (int it = 0; it < kMaxItems; ++it) {
    const int item = warp + it * kWarps;
    if (item >= items) continue;
    const int r = item / p.steps, step = item % p.steps;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int e = step * 16 + 2 * g + h, s = e / kCP, c = e % kCP;
      if (e >= p.run || c >= p.C) continue;
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int k = k0 + (2 * t + j) * 8 + nb;
          if (k < p.K) dst[((int64_t(k) * p.C + c) * p.R + r) * p.S + s] = acc[it][nb][2 * h + j];
        }
      }
    }
  }
}

} // namespace

at::Tensor weight_grad(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
                       const Geometry& g) {
  const int esize = element_size(x.scalar_type());
  const Params p = params(g, Pass::kWeightGrad, esize);
  at::Tensor partial;
  dispatch(x.scalar_type(), padded_channels(g, esize), [&](auto tag, auto cp) {
    using T = decltype(tag);
    const auto launch = [&](auto kernel) {
      const dim3 grid = grid_for(kernel, p, Pass::kWeightGrad);
      partial = at::empty({int64_t(grid.x), g.K, g.C, g.R, g.S}, x.options().dtype(at::kFloat));
      kernel<<<grid, kThreads, p.smem, at::cuda::getCurrentCUDAStream()>>>(
          x.const_data_ptr<T>(), grad_out.const_data_ptr<T>(), partial.mutable_data_ptr<float>(), p);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    if constexpr (std::is_same_v<T, float>) {
      launch(stem_weight_grad_tf32<decltype(cp)::value>);
    } else {
      launch(stem_weight_grad<T, decltype(cp)::value>);
    }
  });
  return sum_weight_partials(partial, weight);
}

} // namespace customops::cuda::stem
