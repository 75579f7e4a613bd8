// conv2d of few-channel images on the tensor cores (mma.sync m16n8k16; float32 as TF32 m16n8k8, steps of 8
// elements where this comment says 16). A block walks output tiles of kTileP rows x kTileQ pixels for a slice of
// at most kSliceK output channels; per tile it copies the input window into shared memory with each pixel's
// channels zero-padded to kCP elements (4 or 8), so that output pixel q's taps along filter row r are the run of
// S * kCP elements starting at window row (q's row stride + r) and element q * stride_w * kCP. With kCP = 4 and
// an even horizontal stride (or 4-byte elements), or kCP = 8, every run starts on 16 bytes, which is what ldmatrix
// reads. The reduction of an MMA is 16 consecutive elements of a run, so a 3-channel 7x7 filter row (21 products)
// costs 2 MMA steps of 16 instead of 7 taps of 8 channels.
//  - forward (`stem_conv`, this file): a warp per output row; per filter row and step, one ldmatrix.x4 of 16
//    pixels' runs (the A fragment; elements past the run masked to zero, as they belong to the next pixels) feeds
//    8 MMAs, one per 8 output channels, whose B fragments the block packed from the filter into shared memory.
//  - weight gradient (`stem_weight_grad`, stem_wgrad.cu): dW[k][r][run element] = sum over pixels of
//    grad_out[pixel][k] * run[pixel][element], an MMA of M = 16 run elements x N = 8 output channels x K = 16
//    pixels of a tile row; both operands pixel-major in shared memory, read by ldmatrix.trans. A warp keeps its
//    (filter row, 16 run elements) items' accumulators over all the block's tiles and writes them once as the
//    block's partial sums. In TF32 (`stem_weight_grad_tf32`) the same items, the fragments read by plain loads:
//    see there.
//  - input gradient (`stem_input_grad`, stem_dgrad.cu): see there.
// This file also holds which calls the kernels take (takes); stem_common.cuh holds what the three files share.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/stem.h"
#include "kernels/cuda/conv2d/stem_common.cuh"

namespace customops::cuda::stem {
namespace {
// The forward's B fragments for output channels k0.. (at most kSliceK), bsm[(r * steps + step) * kNB + nb][lane]:
// {b0, b1} of run elements step * kStep + kPer * (lane % 4) + {0, .., kPer - 1} (+ kE for b1), output channel
// nb * 8 + lane / 4; zeros for padded channels, elements past the run and channels past K.
template <typename T, int kCP>
__device__ void pack_filter(uint2* bsm, const T* __restrict__ w, const Params& p, int k0, int64_t sk, int64_t sc,
                            int64_t sr, int64_t ss) {
  const int words = p.R * p.steps * kNB * 32;
  for (int i = threadIdx.x; i < words; i += kThreads) {
    const int lane = i % 32, nb = i / 32 % kNB, step = i / 32 / kNB % p.steps, r = i / 32 / kNB / p.steps;
    const int k = k0 + nb * 8 + lane / 4;
    using M = Mma<T>;
    uint32_t word[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      T v[M::kPer];
#pragma unroll
      for (int j = 0; j < M::kPer; ++j) {
        const int e = step * M::kStep + M::kE * h + M::kPer * (lane % 4) + j, s = e / kCP, c = e % kCP;
        v[j] = k < p.K && e < p.run && c < p.C ? w[k * sk + c * sc + r * sr + s * ss] : T(0.f);
      }
      word[h] = M::word(v);
    }
    bsm[i] = make_uint2(word[0], word[1]);
  }
}

// Three blocks an SM (80 registers): at two (118 registers) an H100 issued in 44% of cycles, waiting on the window
// copies and shared-memory loads with too few warps to switch to.
template <typename T, int kCP>
__global__ void __launch_bounds__(kThreads, 3)
    stem_conv(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
              Params p, int64_t sk, int64_t sc, int64_t sr, int64_t ss) {
  extern __shared__ uint4 smem[];
  const int k0 = blockIdx.y * kSliceK;
  uint2* bsm = reinterpret_cast<uint2*>(smem);
  auto* window = reinterpret_cast<Padded<T, kCP>*>(bsm + p.R * p.steps * kNB * 32);
  pack_filter<T, kCP>(bsm, w, p, k0, sk, sc, sr, ss);  // visible after the first tile's barrier
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row_bytes = p.slots * kCP * int(sizeof(T));
  const uint32_t window_base = sm80::smem_address(window);
  using M = Mma<T>;
  // ldmatrix.x4 of A (16 pixels x kStep elements): lanes 0-7 address pixels 0-7 at the step's first kE elements,
  // lanes 8-15 pixels 8-15, lanes 16-31 the same at the next kE.
  const int a_offset = ((lane % 16) * p.stride_w * kCP + M::kE * (lane / 16)) * int(sizeof(T));
  const int tiles_q = (p.OW + kTileQ - 1) / kTileQ, tiles_p = (p.OH + kTileP - 1) / kTileP;
  const int64_t tiles = p.N * tiles_p * tiles_q;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int ow0 = int(t % tiles_q) * kTileQ, oh0 = int(t / tiles_q % tiles_p) * kTileP;
    const int64_t n = t / tiles_q / tiles_p;
    __syncthreads();  // the previous tile's window is read
    copy_window<T, kCP>(window, x, p, n, oh0, ow0);
    __syncthreads();
    const int oh = oh0 + warp;
    if (oh >= p.OH) continue;
    float acc[kNB][4] = {};
    for (int r = 0; r < p.R; ++r) {
      const uint32_t row = window_base + (warp * p.stride_h + r * p.dil_h) * row_bytes + a_offset;
      const uint2* b = bsm + r * p.steps * kNB * 32 + lane;
      for (int step = 0; step < p.steps; ++step) {
        uint32_t a[4];
        sm80::ldmatrix_x4<false>(a, row + step * M::kStep * int(sizeof(T)));
        // Elements past the run are the next pixels' taps: zero them (the filter's zeros would not hide an
        // infinity there).
        const int e = step * M::kStep + M::kPer * (lane % 4);
        if (e >= p.run) a[0] = a[1] = 0;
        if (e + M::kE >= p.run) a[2] = a[3] = 0;
#pragma unroll
        for (int nb = 0; nb < kNB; ++nb) {
          const uint2 bb = b[(step * kNB + nb) * 32];
          M::run(acc[nb], a, bb.x, bb.y);
        }
      }
    }
    // Accumulator {0, 1}: pixel lane / 4, channels 2 * (lane % 4) + {0, 1}; {2, 3}: pixel lane / 4 + 8.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ow = ow0 + lane / 4 + 8 * h;
      if (ow >= p.OW) continue;
      T* dst = y + ((n * p.OH + oh) * p.OW + ow) * p.K;
#pragma unroll
      for (int nb = 0; nb < kNB; ++nb) {
        const int k = k0 + nb * 8 + 2 * (lane % 4);
        if (k < p.K) {  // K is even
          const float b0 = bias != nullptr ? static_cast<float>(bias[k]) : 0.f;
          const float b1 = bias != nullptr ? static_cast<float>(bias[k + 1]) : 0.f;
          if constexpr (M::kTf32) {
            *reinterpret_cast<float2*>(dst + k) = make_float2(acc[nb][2 * h] + b0, acc[nb][2 * h + 1] + b1);
          } else {
            *reinterpret_cast<sm80::Pair<T>*>(dst + k) = {static_cast<T>(acc[nb][2 * h] + b0),
                                                          static_cast<T>(acc[nb][2 * h + 1] + b1)};
          }
        }
      }
    }
  }
}

} // namespace

bool takes(at::ScalarType dtype, const Geometry& g, int64_t groups, Pass pass_, bool allow_tf32) {
  const bool tf32 = dtype == at::kFloat && allow_tf32;
  if (dtype != at::kHalf && dtype != at::kBFloat16 && !tf32) return false;
  if (groups != 1 || g.N == 0) return false;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  if (g.C < 1 || g.C > 7 || g.K % 2 != 0 || g.dil_w != 1) return false;
  // 32-bit window and tile arithmetic; 64-bit offsets from the batch index on. Padding, stride and dilation are
  // int (Params); the product is compared by division, as a huge stride wrapped it.
  if (!implicit_gemm::window_fits_int32(g)) return false;
  const int64_t most = std::numeric_limits<int32_t>::max() / 4;
  if (std::max({g.H, g.W, g.P, g.Q, g.K, g.R, g.S, g.pad_h, g.pad_w}) >
      most / std::max<int64_t>({g.stride_h, g.stride_w, g.dil_h, 1})) {
    return false;
  }
  // grad_out's rows are copied in 16-byte chunks; the input gradient reduces over all its channels in one block.
  if (pass_ != Pass::kForward && g.K % 8 != 0) return false;
  if (pass_ == Pass::kInputGrad && g.K > kSliceK) return false;
  const int esize = element_size(dtype);
  if (pass_ != Pass::kInputGrad && g.S * padded_channels(g, esize) > kMaxRun) return false;
  const Params p = params(g, pass_, esize);
  if (pass_ == Pass::kWeightGrad && p.R * p.steps > kMaxItems * kWarps) return false;
  return p.smem <= kSmemCap;
}

void forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
             const Geometry& g) {
  const int esize = element_size(x.scalar_type());
  const Params p = params(g, Pass::kForward, esize);
  dispatch(x.scalar_type(), padded_channels(g, esize), [&](auto tag, auto cp) {
    using T = decltype(tag);
    const auto kernel = stem_conv<T, decltype(cp)::value>;
    kernel<<<grid_for(kernel, p, Pass::kForward), kThreads, p.smem, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<T>(), w.const_data_ptr<T>(), bias.defined() ? bias.const_data_ptr<T>() : nullptr,
        y.mutable_data_ptr<T>(), p, w.stride(0), w.stride(1), w.stride(2), w.stride(3));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

} // namespace customops::cuda::stem
