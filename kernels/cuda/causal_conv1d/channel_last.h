// causal_conv1d.mamba's CUDA kernels for Mamba's layout: x (B, C, L) viewed from (B, L, C) in memory, so that
// a step of a row is C consecutive values, read a few channels per access (up to 16 bytes). mamba.cu takes this
// path where takes() says so and keeps its generic kernels for every other layout and width.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace customops::cuda::causal_conv1d_channel_last {

// x channel-last, non-empty, its channels, batch and step strides whole 16-byte vectors from a 16-byte aligned
// start, and a width of 2, 3 or 4 (Mamba's; the kernels keep the window in registers, one case per width).
bool takes(const at::Tensor& x, int64_t width);

// A tensor laid out as takes() asks of x (for grad_out, which may come in another layout).
bool vectorisable(const at::Tensor& t);

// The arguments checked by the caller; weight (C, K) and bias contiguous, bias, seq_idx ((B, L) contiguous int32)
// and initial_states ((B, C, K-1), any strides) undefined where not given. out: x's layout.
void forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& seq_idx,
             const at::Tensor& initial_states, bool silu, const at::Tensor& out);

// grad_out vectorisable; grad_x in x's layout, grad_weight (C, K), grad_bias (C) and grad_initial_states
// (B, C, K-1) contiguous, each undefined where not asked for.
void backward(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
              const at::Tensor& seq_idx, const at::Tensor& initial_states, bool silu, const at::Tensor& grad_x,
              const at::Tensor& grad_weight, const at::Tensor& grad_bias, const at::Tensor& grad_initial_states);

} // namespace customops::cuda::causal_conv1d_channel_last
