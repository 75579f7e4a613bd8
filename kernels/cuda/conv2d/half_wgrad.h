// conv2d's weight gradient for float16 and bfloat16 on the tensor cores (mma.sync, sm_80 and later), one group,
// for few channels (half_wgrad.cu). CUTLASS's SM90 weight gradient (the implicit GEMM) computes each of a
// 3x3 filter's 9 taps as a tile of its own, each reading all of grad_out and its own shifted copy of the input, and
// has too few tiles to fill the GPU at 64 channels: launched in batch chunks (a launch each, 13 us of host time
// apiece), ResNet-50's 64-channel 3x3 layer ran at 1.6x cuDNN's time. This kernel copies each input window once
// for all taps, in one launch. Host functions.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/cuda/conv2d/implicit.h"

namespace customops::cuda::half_wgrad {

using implicit_gemm::Geometry;
using implicit_gemm::Refusal;

// Whether the kernel takes a weight gradient: float16 or bfloat16, a device of compute capability 8.0 or later,
// channels multiples of 8 (16-byte pixels), a non-empty batch, sizes of 32-bit range and a window that fits shared
// memory; kSlower beyond 64 channels on either side or 9 taps, where CUTLASS's kernel measured faster. kNone,
// kDtype, kDevice, kAlignment, kSize or kSlower.
Refusal supports_weight_grad(at::ScalarType dtype, const Geometry& g);

// The float32 partial sums (chunks, K, C, R, S) of the weight gradient, to be summed over the first dimension:
// grad_out NPQK and x NHWC, dense, x's dtype, 16-byte aligned.
at::Tensor weight_grad_partials(const at::Tensor& grad_out, const at::Tensor& x, const Geometry& g);

} // namespace customops::cuda::half_wgrad
