// The channels_last forward and input gradient in float and double; half
// types in nhwc_half.cpp. The kernels: nhwc_gather.h.
#include "kernels/cpu/depthwise_conv2d/nhwc_gather.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty_like.h>

namespace customops::cpu::CPU_CAPABILITY {

void depthwise_forward_nhwc(const conv::DepthwisePlan& p) {
  check_layout(p);
  TORCH_INTERNAL_ASSERT(p.out.is_contiguous(at::MemoryFormat::ChannelsLast));
  if (at::isReducedFloatingType(p.x.scalar_type())) return depthwise_forward_nhwc_half(p);
  AT_DISPATCH_FLOATING_TYPES(p.x.scalar_type(), "depthwise_conv2d_nhwc_cpu", [&] { forward<scalar_t>(p); });
}

at::Tensor depthwise_input_grad_nhwc(const conv::DepthwiseBackwardPlan& bp) {
  check_layout(bp.p);
  TORCH_INTERNAL_ASSERT(bp.gout.is_contiguous(at::MemoryFormat::ChannelsLast));
  at::Tensor grad_input = at::empty_like(bp.p.x);
  if (at::isReducedFloatingType(bp.p.x.scalar_type())) {
    depthwise_input_grad_nhwc_half(bp, grad_input);
  } else {
    AT_DISPATCH_FLOATING_TYPES(bp.p.x.scalar_type(), "depthwise_input_grad_nhwc_cpu",
                               [&] { input_grad<scalar_t>(bp, grad_input); });
  }
  return grad_input;
}

} // namespace customops::cpu::CPU_CAPABILITY
