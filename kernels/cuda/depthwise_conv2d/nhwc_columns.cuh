// depthwise_conv2d on CUDA, channels_last: the column kernels for 3x3 windows
// (MobileNet's and most depthwise layers) in every floating dtype: the forward
// and the unit-stride input gradient, and the weight gradient, at row stride 1
// or 2. nhwc.cu and nhwc_wgrad.cu try them before their row-streaming and
// tiled kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

namespace customops::cuda::depthwise_nhwc::columns {

// dst[n, y, x, c] = sum over the 3x3 taps of src[n, y*sh - ph + i, x*sw - pw + j, c] * tap(c, i, j):
// one input channel per output channel, no dilation. flipped: tap(c, i, j) is
// weight[c, 2-i, 2-j] (the unit-stride input gradient, over output gradients
// with padding 2 - p). Dense NHWC tensors; pad_h and pad_w may be negative.
struct Problem {
  const void* src;
  const void* weight;  // (channels, 1, 3, 3), contiguous
  const void* bias;    // nullptr or (channels)
  void* dst;
  at::ScalarType dtype;
  int64_t batch, channels, src_h, src_w, dst_h, dst_w;
  int kh, kw, sh, sw, dh, dw, ph, pw, m;
  bool flipped;
};

// Launches the kernel and returns true where it takes the problem: 3x3, no
// dilation, m == 1, row stride 1 or 2, channels a multiple of a thread's lanes
// (16 bytes of float or double, 8 of half types; half types from 64
// channels), src and dst aligned to them. false leaves dst untouched.
bool run(const Problem& p, cudaStream_t stream);

// The weight gradient's sums over x (N, src_h, src_w, C) and gout (N, dst_h,
// dst_w, C), both dense NHWC: dW[c, i, j] = sum of gout[n, oy, ox, c] *
// x[n, oy * sh - ph + i, ox * sw - pw + j, c] over the positions inside x.
struct GradProblem {
  const void* x;
  const void* gout;
  at::ScalarType dtype;
  int64_t batch, channels, src_h, src_w, dst_h, dst_w;
  int kh, kw, sh, sw, dh, dw, ph, pw, m;
};

// The blocks' partial sums (parts, channels, 9) in `options` (dtype: the
// opmath type of p.dtype), to be added in part order (sum_parts), where the
// kernel takes the problem: 3x3, row stride 1 or 2, no dilation, m == 1,
// channels a multiple of a thread's lanes (16 bytes of float or double, 8 of
// half types) and x and gout aligned to them; else nothing is launched.
std::optional<at::Tensor> weight_grad_parts(const GradProblem& p, const at::TensorOptions& options,
                                            cudaStream_t stream);

// Forced off by CUSTOMOPS_DEPTHWISE_ALGO=rows (read per call: tests and
// benchmarks compare the two).
bool enabled();

} // namespace customops::cuda::depthwise_nhwc::columns
