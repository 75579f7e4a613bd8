#pragma once

#include <ATen/core/Tensor.h>

namespace customops {

// Sliding-window columns of an image, as torch::nn::functional::unfold: input
// (N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L) or (C*kh*kw, L), with
// L = out_h * out_w windows; rows ordered (c, i, j), columns (oh, ow), zeros
// where a window covers padding. All four floating dtypes, CPU and CUDA.
at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride);

// Sums columns back into an image of output_size (H, W), as
// torch::nn::functional::fold: the adjoint of im2col. Deterministic (gathers,
// no atomics).
at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);

// Gradient of im2col for an input of spatial size input_size (= col2im).
at::Tensor im2col_backward(const at::Tensor& grad_out, at::IntArrayRef input_size, at::IntArrayRef kernel_size,
                           at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);

// Gradient of col2im (= im2col).
at::Tensor col2im_backward(const at::Tensor& grad_out, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                           at::IntArrayRef padding, at::IntArrayRef stride);

} // namespace customops
