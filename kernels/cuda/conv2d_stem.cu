// conv2d of few-channel images on the tensor cores (mma.sync m16n8k16; float32 as TF32 m16n8k8, steps of 8
// elements where this comment says 16). A block walks output tiles of kTileP rows x kTileQ pixels for a slice of
// at most kSliceK output channels; per tile it copies the input window into shared memory with each pixel's
// channels zero-padded to kCP elements (4 or 8), so that output pixel q's taps along filter row r are the run of
// S * kCP elements starting at window row (q's row stride + r) and element q * stride_w * kCP. With kCP = 4 and
// an even horizontal stride (or 4-byte elements), or kCP = 8, every run starts on 16 bytes, which is what ldmatrix
// reads. The reduction of an MMA is 16 consecutive elements of a run, so a 3-channel 7x7 filter row (21 products)
// costs 2 MMA steps of 16 instead of 7 taps of 8 channels.
//  - forward (`stem_conv`): a warp per output row; per filter row and step, one ldmatrix.x4 of 16 pixels' runs
//    (the A fragment; elements past the run masked to zero, as they belong to the next pixels) feeds 8 MMAs, one
//    per 8 output channels, whose B fragments the block packed from the filter into shared memory.
//  - weight gradient (`stem_weight_grad`): dW[k][r][run element] = sum over pixels of grad_out[pixel][k] *
//    run[pixel][element], an MMA of M = 16 run elements x N = 8 output channels x K = 16 pixels of a tile row;
//    both operands pixel-major in shared memory, read by ldmatrix.trans. A warp keeps its (filter row, 16 run
//    elements) items' accumulators over all the block's tiles and writes them once as the block's partial sums.
//    In TF32 (`stem_weight_grad_tf32`) the same items, the fragments read by plain loads: see there.
//  - input gradient (`stem_input_grad`): see there.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/conv2d_partials.h"
#include "kernels/cuda/conv2d_stem.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_sm80.cuh"

namespace customops::cuda::stem {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileQ = 16;          // output pixels of a tile row: the MMA's M (forward) or reduction (weight grad)
constexpr int kTileP = kWarps;      // output rows of a tile: a warp each in the forward
constexpr int kSliceK = 64;         // output channels of a block: 8 MMA column blocks of 8
constexpr int kNB = kSliceK / 8;
constexpr int kMaxRun = 64;         // elements of a filter row's run: 4 MMA steps of 16
constexpr int kMaxItems = 2;        // weight gradient: (filter row, step) accumulator sets a warp holds
constexpr int64_t kSmemCap = 100 << 10;

struct Params {
  int64_t N;
  int IH, IW, C, OH, OW, K, R, S, pad_h, pad_w, stride_h, stride_w, dil_h;
  int run;         // S * kCP: one filter row's (tap, channel) elements for one output pixel
  int steps;       // MMA steps of 16 elements that cover a run
  int rows;        // window rows: input rows a tile's taps read
  int slots;       // window pixels a row holds: the taps' columns, then zeros up to the last run's last step
  int last_ih, last_iw;  // the last input row and column in the image that an output pixel reads
  int64_t smem;
};

template <typename T, int kCP>
struct alignas(sizeof(T) * kCP) Padded {
  T v[kCP];
};

// The MMA for element type T: m16n8k16 for float16 and bfloat16, m16n8k8 TF32 for float32 (its operands rounded to
// TF32 as cuBLAS rounds them). An ldmatrix row of 16 bytes holds kE elements, a fragment register kPer, and an
// MMA step reduces over kStep = 2 * kE. With 4-byte elements ldmatrix (a b16 instruction) gives each lane one
// whole element per register, at the TF32 fragment's (row lane / 4, column lane % 4) position.
template <typename T>
struct Mma {
  static constexpr bool kTf32 = std::is_same_v<T, float>;
  static constexpr int kE = 16 / int(sizeof(T));
  static constexpr int kPer = 4 / int(sizeof(T));
  static constexpr int kStep = 2 * kE;

  // An element as the MMA takes it.
  static __device__ __forceinline__ T operand(T v) {
    if constexpr (kTf32) {
      return __uint_as_float(sm80::to_tf32(v));
    } else {
      return v;
    }
  }

  // A fragment register of kPer consecutive reduction elements.
  static __device__ __forceinline__ uint32_t word(const T (&v)[kPer]) {
    if constexpr (kTf32) {
      return sm80::to_tf32(v[0]);
    } else {
      const sm80::Pair<T> pair{v[0], v[1]};
      return *reinterpret_cast<const uint32_t*>(&pair);
    }
  }

  // Fragment registers loaded as they are from memory the kernel did not round (cp.async copies).
  static __device__ __forceinline__ void round(uint32_t (&a)[4]) {
    if constexpr (kTf32) sm80::round_tf32(a);
  }

  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (kTf32) {
      sm80::mma_16x8x8_tf32(d, a, b0, b1);
    } else {
      sm80::mma_16x8x16<T>(d, a, b0, b1);
    }
  }
};

// The window of output tile (n, oh0, ow0): rows x slots pixels of kCP elements, the image's C channels then zeros;
// zeros outside the image and past the last pixel any output reads (an infinity there would reach the weight
// gradient through a zero grad_out).
template <typename T, int kCP>
__device__ __forceinline__ void copy_window(Padded<T, kCP>* window, const T* __restrict__ x, const Params& p,
                                            int64_t n, int oh0, int ow0) {
  const int ih0 = oh0 * p.stride_h - p.pad_h, iw0 = ow0 * p.stride_w - p.pad_w;
  const int cols = (kTileQ - 1) * p.stride_w + p.S;
  for (int i = threadIdx.x; i < p.rows * p.slots; i += kThreads) {
    const int wr = i / p.slots, wc = i % p.slots, ih = ih0 + wr, iw = iw0 + wc;
    Padded<T, kCP> v;
#pragma unroll
    for (int c = 0; c < kCP; ++c) v.v[c] = T(0.f);
    if (wc < cols && ih >= 0 && ih <= p.last_ih && iw >= 0 && iw <= p.last_iw) {
      const T* src = x + ((n * p.IH + ih) * p.IW + iw) * p.C;
#pragma unroll
      for (int c = 0; c < kCP; ++c) {
        if (c < p.C) v.v[c] = Mma<T>::operand(src[c]);
      }
    }
    window[i] = v;
  }
}

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

// A pixel's channels in the window: 4 where every run then starts on 16 bytes (float32 always; the half types at
// even horizontal strides), else 8.
int padded_channels(const Geometry& g, int esize) {
  return g.C <= 4 && (esize == 4 || g.stride_w % 2 == 0) ? 4 : 8;
}

// esize: the element's bytes (2, or 4 for float32 as TF32).
Params params(const Geometry& g, Pass pass_, int esize) {
  Params p{};
  const int cp = padded_channels(g, esize);
  // Mma<T>::kStep; the weight gradient's steps are of 16 run elements, its MMA's M, in every dtype.
  const int step = pass_ == Pass::kWeightGrad ? 16 : 32 / esize;
  p.N = g.N;
  p.IH = int(g.H), p.IW = int(g.W), p.C = int(g.C), p.OH = int(g.P), p.OW = int(g.Q), p.K = int(g.K);
  p.R = int(g.R), p.S = int(g.S), p.pad_h = int(g.pad_h), p.pad_w = int(g.pad_w);
  p.stride_h = int(g.stride_h), p.stride_w = int(g.stride_w), p.dil_h = int(g.dil_h);
  if (pass_ == Pass::kInputGrad) {
    // steps: of kStep output channels; rows x slots: the grad_out pixels a tile reads (at most; kSliceK channels
    // each); the packed filter: 8-byte words of 4 * C lanes.
    p.steps = (p.K + step - 1) / step;
    p.rows = (kTileP - 1 + (p.R - 1) * p.dil_h) / p.stride_h + 2;
    p.slots = kTileQ + 2 + (p.S + p.stride_w - 2) / p.stride_w;
    p.smem = int64_t(p.R) * p.S * p.steps * 4 * p.C * 8 + int64_t(p.rows) * p.slots * kSliceK * esize;
    return p;
  }
  p.run = p.S * cp;
  p.steps = (p.run + step - 1) / step;
  p.rows = (kTileP - 1) * p.stride_h + (p.R - 1) * p.dil_h + 1;
  // The last pixel's last step reads (kTileQ - 1) * stride_w * cp + steps * kStep elements.
  p.slots = std::max((kTileQ - 1) * p.stride_w + p.S, ((kTileQ - 1) * p.stride_w * cp + p.steps * step) / cp);
  const int per_chunk = std::max(1, 16 / (esize * cp));  // rows of whole 16-byte chunks: ldmatrix's rows are aligned
  p.slots = (p.slots + per_chunk - 1) / per_chunk * per_chunk;
  p.last_ih = std::min(p.IH - 1, (p.OH - 1) * p.stride_h - p.pad_h + (p.R - 1) * p.dil_h);
  p.last_iw = std::min(p.IW - 1, (p.OW - 1) * p.stride_w - p.pad_w + p.S - 1);
  const int64_t window = int64_t(p.rows) * p.slots * cp * esize;
  p.smem = window + (pass_ == Pass::kWeightGrad ? int64_t(kTileP) * kTileQ * kSliceK * esize
                                                : int64_t(p.R) * p.steps * kNB * 32 * 8);
  return p;
}

// Output tiles (the input gradient: input tiles) of a pass.
int64_t tiles(const Params& p, Pass pass_) {
  if (pass_ == Pass::kInputGrad) {
    return p.N * ((p.IH + kTileP - 1) / kTileP) * ((p.IW + kTileQ * p.stride_w - 1) / (kTileQ * p.stride_w));
  }
  return p.N * ((p.OH + kTileP - 1) / kTileP) * ((p.OW + kTileQ - 1) / kTileQ);
}

// One wave of resident blocks (x: tiles, looped over; y: output-channel slices, one for the input gradient).
template <typename Kernel>
dim3 grid_for(Kernel kernel, const Params& p, Pass pass_) {
  launch::opt_in_shared_memory(kernel);
  const int64_t slices = pass_ == Pass::kInputGrad ? 1 : (p.K + kSliceK - 1) / kSliceK;
  const int64_t resident = launch::resident_blocks(kernel, kThreads, p.smem);
  return dim3(static_cast<unsigned>(std::clamp<int64_t>(resident / slices, 1, tiles(p, pass_))),
              static_cast<unsigned>(slices));
}

// fn(T{}) for the call's dtype: float16, bfloat16 or float32 (TF32).
template <typename Fn>
void dispatch(at::ScalarType dtype, Fn&& fn) {
  if (dtype == at::kHalf) {
    fn(at::Half{});
  } else if (dtype == at::kBFloat16) {
    fn(at::BFloat16{});
  } else {
    fn(float{});
  }
}

// fn(T{}, std::integral_constant<int, kCP>{}) for the call's dtype and channel padding.
template <typename Fn>
void dispatch(at::ScalarType dtype, int cp, Fn&& fn) {
  dispatch(dtype, [&](auto tag) {
    if (cp == 4) {
      fn(tag, std::integral_constant<int, 4>{});
    } else {
      fn(tag, std::integral_constant<int, 8>{});
    }
  });
}

int element_size(at::ScalarType dtype) {
  return dtype == at::kFloat ? 4 : 2;
}

} // namespace

bool takes(at::ScalarType dtype, const Geometry& g, int64_t groups, Pass pass_, bool allow_tf32) {
  const bool tf32 = dtype == at::kFloat && allow_tf32;
  if (dtype != at::kHalf && dtype != at::kBFloat16 && !tf32) return false;
  if (groups != 1 || g.N == 0) return false;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  if (g.C < 1 || g.C > 7 || g.K % 2 != 0 || g.dil_w != 1) return false;
  // 32-bit window and tile arithmetic; 64-bit offsets from the batch index on.
  const int64_t most = std::numeric_limits<int32_t>::max() / 4;
  if (std::max({g.H, g.W, g.P, g.Q, g.K, g.R, g.S, g.pad_h, g.pad_w}) *
          std::max<int64_t>({g.stride_h, g.stride_w, g.dil_h, 1}) > most) {
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
