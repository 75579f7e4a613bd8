#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <tuple>

namespace customops {

// 2-D convolution, equal to torch::nn::functional::conv2d with numeric padding:
// input (N, C, H, W) or (C, H, W), weight (O, C/groups, kh, kw), bias (O) or
// none. Computed as im2col + batched GEMM (BLAS / cuBLAS); the column buffer is
// built a chunk of the batch at a time, at most CUSTOMOPS_CONV2D_WORKSPACE_MIB
// (default 256) MiB unless one image's columns alone are larger. A 1x1,
// stride-1, unpadded convolution skips im2col.
at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias = {},
                  at::IntArrayRef stride = {1, 1}, at::IntArrayRef padding = {0, 0},
                  at::IntArrayRef dilation = {1, 1}, int64_t groups = 1);

// Gradients of conv2d with respect to (input, weight, bias); an entry is
// computed only where output_mask asks for it, and is undefined otherwise.
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                               const at::Tensor& weight, at::IntArrayRef stride,
                                                               at::IntArrayRef padding, at::IntArrayRef dilation,
                                                               int64_t groups, std::array<bool, 3> output_mask);

// Depthwise convolution: weight (C*m, 1, kh, kw) for a channel multiplier
// m >= 1; output channel o reads input channel o / m. Equal to conv2d with
// groups = C, computed by direct kernels (no column buffer).
at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias = {}, at::IntArrayRef stride = {1, 1},
                            at::IntArrayRef padding = {0, 0}, at::IntArrayRef dilation = {1, 1});

std::tuple<at::Tensor, at::Tensor, at::Tensor> depthwise_conv2d_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, std::array<bool, 3> output_mask);

} // namespace customops
