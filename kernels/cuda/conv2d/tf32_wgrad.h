// conv2d's weight gradient for float32 in TF32 on the tensor cores (mma.sync, sm_80 and later), one group,
// channels_last memory (tf32_wgrad.cu). Neither library path takes it well: CUTLASS's SM90 convolutions
// have no TF32 weight gradient on NHWC memory (WGMMA reads TF32 operands only K-major, and both operands of
// this GEMM are strided along its reduction, the pixels), and the explicit path writes R*S copies of the input
// (ResNet-50's 64-channel 3x3 layer at batch 64: 0.51 ms on an H100, cuDNN 0.16). Host functions.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/cuda/conv2d/implicit.h"

namespace customops::cuda::tf32 {

using implicit_gemm::Geometry;
using implicit_gemm::Refusal;

// Whether the kernel takes a weight gradient (TF32 allowed is the caller's check): float32, a device of compute
// capability 8.0 or later, input and output channels multiples of 4 (16-byte pixels), a non-empty batch, sizes
// of 32-bit range and a window that fits shared memory; not where the explicit path measured faster (more than
// 196 output pixels an image with more than 256 channels on both sides, or with more than 64 and a stride for an
// NCHW input, `channels_last` false). kNone, kDtype, kDevice, kAlignment, kSize or kSlower.
Refusal supports_weight_grad(at::ScalarType dtype, const Geometry& g, bool channels_last);

// The float32 partial sums (chunks, K, C, R, S) of the weight gradient, to be summed over the first dimension:
// grad_out NPQK and x NHWC, dense, float32, 16-byte aligned.
at::Tensor weight_grad_partials(const at::Tensor& grad_out, const at::Tensor& x, const Geometry& g);

} // namespace customops::cuda::tf32
