// conv2d of images with few channels (a network's stem: 3 -> 64 channels, 7x7, stride 2) on the tensor cores
// (mma.sync, sm_80 and later): forward, input gradient and weight gradient in float16, bfloat16 and float32 as
// TF32 (stem.cu, stem_dgrad.cu, stem_wgrad.cu). The implicit GEMM needs 16-byte channel rows (8 half channels), and im2col + GEMM writes
// and reads R * S copies of the image; these kernels pad the few channels to 4 or 8 in shared memory instead, so
// that one output pixel's taps along a filter row are one contiguous run of elements there: the MMA's reduction
// runs over (tap, channel) pairs, not over channels one tap at a time. The input gradient reduces over output
// channels, with the input channels (zero-padded to 8) as the MMA's N.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/cuda/conv2d/implicit.h"

namespace customops::cuda::stem {

using implicit_gemm::Geometry;
using implicit_gemm::Pass;

// Whether the stem kernels take the pass: float16 or bfloat16, or float32 as TF32 where allow_tf32, a device of compute capability 8.0 or later, one group, 1 to 7 input channels, an even
// number of output channels (a multiple of 8 for the gradients, at most 64 for the input gradient), unit
// horizontal dilation, for the forward and weight gradient a filter row of at most 64 (tap, channel) elements once
// the channels are padded (to 4 for at most 4 channels where runs stay 16-byte aligned, else to 8), a non-empty
// batch, and a tile that fits shared memory. Pointer alignment (16 bytes) is the caller's.
bool takes(at::ScalarType dtype, const Geometry& g, int64_t groups, Pass pass_, bool allow_tf32);

// y = conv(x, w) + bias. x: NHWC, y: NPQK (dense); w: (K, C, R, S), any strides; bias undefined or (K).
void forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
             const Geometry& g);

// grad_input = conv_transpose(grad_out, w), any stride: grad_out NPQK, grad_input NHWC (dense); w any strides.
void input_grad(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g);

// The weight gradient, (K, C, R, S) in weight's dtype and suggested memory format: grad_out NPQK and x NHWC
// (dense). Summed in float32 per block, the blocks' partial sums added once and rounded once.
at::Tensor weight_grad(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const Geometry& g);

} // namespace customops::cuda::stem
