// The channels_last forward and input gradient in float16 and bfloat16 (which
// compute in float), a translation unit apart from nhwc.cpp's float and double
// so that a parallel build compiles the two at once. The kernels: nhwc_gather.h.
#include "kernels/cpu/depthwise_conv2d/nhwc_gather.h"

#include <ATen/Dispatch.h>

namespace customops::cpu::CPU_CAPABILITY {

void depthwise_forward_nhwc_half(const conv::DepthwisePlan& p) {
  AT_DISPATCH_REDUCED_FLOATING_TYPES(p.x.scalar_type(), "depthwise_conv2d_nhwc_cpu", [&] { forward<scalar_t>(p); });
}

void depthwise_input_grad_nhwc_half(const conv::DepthwiseBackwardPlan& bp, at::Tensor& grad_input) {
  AT_DISPATCH_REDUCED_FLOATING_TYPES(bp.p.x.scalar_type(), "depthwise_input_grad_nhwc_cpu",
                                     [&] { input_grad<scalar_t>(bp, grad_input); });
}

} // namespace customops::cpu::CPU_CAPABILITY
