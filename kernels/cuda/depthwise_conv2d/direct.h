// customops' own depthwise kernels, behind the per-pass choice of choice.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>

#include "kernels/conv2d.h"

namespace customops::cuda::depthwise {

// The window's values must fit the kernels' int coordinates.
void check_int_window(const char* op, const conv::DepthwisePlan& p, at::IntArrayRef stride, at::IntArrayRef padding,
                      at::IntArrayRef dilation);

// A plan made without its output: allocates it and runs the forward kernels.
at::Tensor forward(conv::DepthwisePlan& p);

conv::Grads backward(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& weight, std::array<bool, 3> output_mask);

// The input gradient where conv::period_dgrad_applies (period_dgrad.cu), into grad_input (dense in the plan's
// layout, of the input's shape); false, and nothing written, elsewhere.
bool period_input_grad(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& grad_input);

}  // namespace customops::cuda::depthwise
