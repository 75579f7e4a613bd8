// The channels_last depthwise kernels (nhwc_gather.h: forward and input gradient;
// nhwc_wgrad.cpp: weight gradient), used by depthwise_conv2d.cpp for plans
// whose tensors are NHWC in memory.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/conv2d.h"

namespace customops::cpu::CPU_CAPABILITY {

// Writes p.out = depthwise_conv2d(p.x, p.weight, p.bias); p.channels_last.
void depthwise_forward_nhwc(const conv::DepthwisePlan& p);

// The input gradient, channels_last with p.x's shape.
at::Tensor depthwise_input_grad_nhwc(const conv::DepthwiseBackwardPlan& bp);

// The two above for float16 and bfloat16 (nhwc_half.cpp), without the checks.
void depthwise_forward_nhwc_half(const conv::DepthwisePlan& p);
void depthwise_input_grad_nhwc_half(const conv::DepthwiseBackwardPlan& bp, at::Tensor& grad_input);

// The weight gradient, (O, kh*kw) contiguous in the input's dtype; the sums
// have a fixed order that depends on the shapes only (not on the threads).
at::Tensor depthwise_weight_grad_nhwc(const conv::DepthwiseBackwardPlan& bp);

} // namespace customops::cpu::CPU_CAPABILITY
