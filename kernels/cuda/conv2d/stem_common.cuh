// What the stem kernels' three files share (stem.cu: which calls the kernels take, and the forward; stem_dgrad.cu:
// the input gradient; stem_wgrad.cu: the weight gradient): the block and tile constants, the kernels' parameters
// (Params, params()), the padded input window, the MMA of each element type, and the launch helpers. stem.cu's
// first comment describes the kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/stem.h"

namespace customops::cuda::stem {

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

// A pixel's channels in the window: 4 where every run then starts on 16 bytes (float32 always; the half types at
// even horizontal strides), else 8.
inline int padded_channels(const Geometry& g, int esize) {
  return g.C <= 4 && (esize == 4 || g.stride_w % 2 == 0) ? 4 : 8;
}

// esize: the element's bytes (2, or 4 for float32 as TF32).
inline Params params(const Geometry& g, Pass pass_, int esize) {
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
inline int64_t tiles(const Params& p, Pass pass_) {
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

inline int element_size(at::ScalarType dtype) {
  return dtype == at::kFloat ? 4 : 2;
}

} // namespace customops::cuda::stem
