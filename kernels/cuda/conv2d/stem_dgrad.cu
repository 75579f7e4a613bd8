// conv2d of few-channel images on the tensor cores: the input gradient (`stem_input_grad`). stem.cu's first comment
// describes the stem kernels; stem_common.cuh holds what their files share.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/stem.h"
#include "kernels/cuda/conv2d/stem_common.cuh"

namespace customops::cuda::stem {
namespace {
__device__ __forceinline__ int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((b - 1 - a) / b);
}

// The input gradient: grad_in[pixel][c] = sum over the taps (r, s) that reach the pixel and the output channels k
// of grad_out[...][k] * w[k][c][r][s]. A block takes kTileP input rows (a warp each) x kTileQ * stride_w columns
// and copies the grad_out pixels they read (all K <= kSliceK channels) into shared memory; the pixels of a row
// whose column phase (iw + pad_w) % stride_w agrees meet each tap s of that phase at consecutive output pixels,
// so 16 of them are the MMA's M: per (r, s) and kStep channels, ldmatrix.x4 reads the 16 output pixels (A) and
// the packed filter (B: the block's shared memory) gives the 8 input channels (zero-padded) as N. Only the lanes
// of real input channels (lane / 4 < C) hold B words: the packed filter is C / 8 of its padded size.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    stem_input_grad(const T* __restrict__ gout, const T* __restrict__ w, T* __restrict__ gin, Params p, int64_t sk,
                    int64_t sc, int64_t sr, int64_t ss) {
  using M = Mma<T>;
  constexpr int kChunks = kSliceK * int(sizeof(T)) / 16;  // 16-byte chunks of a grad_out pixel's channels
  extern __shared__ uint4 smem[];
  const int lanes = 4 * p.C;
  uint2* bsm = reinterpret_cast<uint2*>(smem);  // [(r * S + s) * steps + step][lane < lanes]
  // [row][col][chunk ^ (col % 8)]; 16-byte aligned: lanes is a multiple of 4
  uint4* dy = reinterpret_cast<uint4*>(bsm + p.R * p.S * p.steps * lanes);
  const int words = p.R * p.S * p.steps * lanes;
  for (int i = threadIdx.x; i < words; i += kThreads) {  // visible after the first tile's barrier
    const int lane = i % lanes, step = i / lanes % p.steps, tap = i / lanes / p.steps, r = tap / p.S, s = tap % p.S;
    const int c = lane / 4;
    uint32_t word[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      T v[M::kPer];
#pragma unroll
      for (int j = 0; j < M::kPer; ++j) {
        const int k = step * M::kStep + M::kE * h + M::kPer * (lane % 4) + j;
        v[j] = k < p.K ? w[k * sk + c * sc + r * sr + s * ss] : T(0.f);
      }
      word[h] = M::word(v);
    }
    bsm[i] = make_uint2(word[0], word[1]);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile_w = kTileQ * p.stride_w, kchunks = p.K * int(sizeof(T)) / 16;
  const int tiles_w = (p.IW + tile_w - 1) / tile_w, tiles_h = (p.IH + kTileP - 1) / kTileP;
  const int64_t tiles = p.N * tiles_h * tiles_w;
  const uint32_t dy_base = sm80::smem_address(dy);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int iw0 = int(t % tiles_w) * tile_w, ih0 = int(t / tiles_w % tiles_h) * kTileP;
    const int64_t n = t / tiles_w / tiles_h;
    const int oh0 = floor_div(ih0 + p.pad_h - (p.R - 1) * p.dil_h, p.stride_h);
    const int ow0 = floor_div(iw0 + p.pad_w - (p.S - 1), p.stride_w);
    __syncthreads();  // the previous tile is read
    for (int i = threadIdx.x; i < p.rows * p.slots * kChunks; i += kThreads) {
      const int j = i % kChunks, col = i / kChunks % p.slots, row = i / kChunks / p.slots;
      const int oh = oh0 + row, ow = ow0 + col;
      const bool ok = j < kchunks && oh >= 0 && oh < p.OH && ow >= 0 && ow < p.OW;  // zeros elsewhere
      const T* src = ok ? gout + ((n * p.OH + oh) * p.OW + ow) * p.K + j * M::kE : gout;
      sm80::copy16(dy + (row * p.slots + col) * kChunks + (j ^ (col % 8)), src, ok);
    }
    sm80::copies_done();
    __syncthreads();
    const int ih = ih0 + warp;
    if (ih >= p.IH) continue;
    for (int phase = 0; phase < p.stride_w; ++phase) {
      const int iw_first = iw0 + phase;  // the warp's pixel m: iw_first + m * stride_w
      // The taps s of this phase: s = iw_first + pad_w (mod stride_w), each a grad_out column further left (a
      // division per phase, not per tap: runtime divisions were a large share of this kernel's instructions).
      const int num_w = iw_first + p.pad_w;
      const int s_first = num_w % p.stride_w, ow_first = num_w / p.stride_w;
      float acc[2][4] = {};  // two chains of dependent MMAs, even and odd steps
      for (int r = 0; r < p.R; ++r) {
        const int num_h = ih + p.pad_h - r * p.dil_h;
        const int oh = floor_div(num_h, p.stride_h);
        if (oh * p.stride_h != num_h) continue;  // the tap misses this row
        const int row = oh - oh0;
        int ow = ow_first;
        for (int s = s_first; s < p.S; s += p.stride_w, --ow) {
          // ldmatrix.x4 of A (16 pixels x kStep channels): lanes 0-15 address pixels 0-15 at the step's first
          // kE channels, lanes 16-31 at the next kE.
          const int col = ow - ow0 + lane % 16;
          const uint32_t a_row = dy_base + (row * p.slots + col) * kChunks * 16;
          const uint2* b = bsm + (r * p.S + s) * p.steps * lanes + lane;
          const auto mma_step = [&](float (&d)[4], int step) {
            uint32_t a[4];
            sm80::ldmatrix_x4<false>(a, a_row + ((2 * step + lane / 16) ^ (col % 8)) * 16);
            M::round(a);
            const uint2 bb = lane < lanes ? b[step * lanes] : make_uint2(0, 0);
            M::run(d, a, bb.x, bb.y);
          };
          int step = 0;
          for (; step + 1 < p.steps; step += 2) {
            mma_step(acc[0], step);
            mma_step(acc[1], step + 1);
          }
          if (step < p.steps) mma_step(acc[0], step);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[0][i] += acc[1][i];
      // Accumulator {0, 1}: pixel lane / 4, channels 2 * (lane % 4) + {0, 1}; {2, 3}: pixel lane / 4 + 8.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int iw = iw_first + (lane / 4 + 8 * h) * p.stride_w;
        if (iw >= p.IW) continue;
        T* dst = gin + ((n * p.IH + ih) * p.IW + iw) * p.C;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int c = 2 * (lane % 4) + j;
          if (c < p.C) dst[c] = static_cast<T>(acc[0][2 * h + j]);
        }
      }
    }
  }
}

} // namespace

void input_grad(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g) {
  const Params p = params(g, Pass::kInputGrad, element_size(grad_out.scalar_type()));
  dispatch(grad_out.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = stem_input_grad<T>;
    kernel<<<grid_for(kernel, p, Pass::kInputGrad), kThreads, p.smem, at::cuda::getCurrentCUDAStream()>>>(
        grad_out.const_data_ptr<T>(), w.const_data_ptr<T>(), grad_input.mutable_data_ptr<T>(), p, w.stride(0),
        w.stride(1), w.stride(2), w.stride(3));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace customops::cuda::stem
