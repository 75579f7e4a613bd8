// conv2d with groups > 1 on CUDA: direct kernels on channels_last memory for groups of few channels
// (ResNeXt's 32 groups of 4-32 channels). Each group's GEMM is too small for a GEMM library's tiles (8 x 72 for
// 8 channels and a 3x3 kernel) and im2col writes 9 copies of the input for it, so these kernels read the input
// once: on the tensor cores (grouped_mma.cu, sm_80+: float16/bfloat16 groups of multiples of 8 channels;
// the forward, the unit-stride input gradient, the weight gradient of 8 output channels a group; the forward and
// input gradient also in float32 as TF32 where allowed), otherwise on the CUDA cores with the filters in shared
// memory (grouped.cu: any CUDA device, float16, bfloat16 and float32, computed in float32). Host functions.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "kernels/cuda/conv2d/implicit.h"

namespace customops::cuda::grouped {

using implicit_gemm::Geometry;
using implicit_gemm::Pass;
using implicit_gemm::Refusal;

// Channels per group (input or output) the direct kernels take: beyond this, the tensor-core GEMMs of the
// explicit path do fewer operations per byte of shared memory than these kernels.
constexpr int64_t kMaxGroupChannels = 32;

// What the direct kernels take (g: all groups' channels): groups > 1; float16, bfloat16 or float32; channels
// per group (input and output) a multiple of 4 (8- or 16-byte vectors) and at most kMaxGroupChannels; filters
// of 8 output-channel vectors that fit a block's shared memory; a non-empty batch. kNone, kDtype, kAlignment or
// kSize. Pointer alignment (16 bytes) is the caller's.
Refusal supports(at::ScalarType dtype, const Geometry& g, int64_t groups);

// The debug log's reason for a refusal of supports().
const char* describe(Refusal r);

// y = conv(x, w) + bias. x: NHWC, y: NPQK (dense, 16-byte aligned); w: (K, C / groups, R, S), any strides;
// bias undefined or (K).
void forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
             const Geometry& g, int64_t groups);

// grad_input = conv_transpose(grad_out, w), any stride: grad_out NPQK, grad_input NHWC (dense, aligned).
void input_grad(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g,
                int64_t groups);

// The weight gradient, (K, C / groups, R, S) in weight's dtype and suggested memory format: grad_out NPQK and
// x NHWC (dense, aligned). Summed in float32 over chunks of pixels, rounded once.
at::Tensor weight_grad(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const Geometry& g,
                       int64_t groups);

} // namespace customops::cuda::grouped
