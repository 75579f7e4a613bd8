// Grouped convolution on the tensor cores (mma.sync, sm_80 and later), float16 and bfloat16 (and float32 as TF32
// for the forward and input gradient), for groups whose input and output channel counts are multiples of 8
// (grouped_mma.cu). Used by grouped.cu for the
// forward, the unit-stride input gradient (the forward of grad_out with the flipped filter) and the weight
// gradient of groups of 8 output channels.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace customops::cuda::grouped::mma {

// in (N, IH, IW, IC) -> out (N, OH, OW, OC), NHWC and dense, groups of ICg -> OCg channels, w (OC, ICg, R, S).
// flip: the input gradient's gather instead: in is grad_out, w the forward's (IC, OCg, R, S) filter, applied
// transposed and rotated (the caller passes stride 1 and padding dilation * (kernel - 1) - padding).
struct Conv {
  int64_t N;
  int IH, IW, IC, OH, OW, OC, ICg, OCg, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  bool flip;
};

// Whether the kernel takes the call: float16 or bfloat16, or float32 as TF32 where allow_tf32, a device of compute
// capability 8.0 or later, ICg and OCg multiples of 8 with OCg at most 32, and an input tile that fits shared
// memory.
bool takes(const Conv& c, at::ScalarType dtype, bool allow_tf32);

// out = conv(in, w) (+ bias, undefined for none); in and out 16-byte aligned.
void run(const at::Tensor& in, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& out, const Conv& c);

// The weight gradient (c in forward orientation: in = x, out = grad_out, not flipped): whether the kernel takes
// it (float16 or bfloat16, sm_80 or later, 8 output channels a group, a multiple of 8 input channels), and its
// float32 partial sums, (blocks, K, C / groups, R, S), to be summed over the first dimension.
bool takes_weight_grad(const Conv& c, at::ScalarType dtype);
at::Tensor weight_grad_partials(const at::Tensor& x, const at::Tensor& grad_out, const Conv& c);

} // namespace customops::cuda::grouped::mma
