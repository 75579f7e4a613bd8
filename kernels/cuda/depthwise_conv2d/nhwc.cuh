// depthwise_conv2d on CUDA for channels_last tensors: NHWC-native kernels that
// depthwise_conv2d.cu calls when a plan is channels_last. Nothing is converted
// to NCHW: the kernels read and write the plan's NHWC buffers directly.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/conv2d.h"

namespace customops::cuda::depthwise_nhwc {

// Fills p.out (N, OH, OW, O in memory).
void forward(const conv::DepthwisePlan& p);

// Fills grad_input, a dense channels_last tensor of p.x's shape.
void input_grad(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& grad_input);

// The weight gradient, of weight's shape and dtype: a fixed-order reduction.
at::Tensor weight_grad(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& weight);

} // namespace customops::cuda::depthwise_nhwc
