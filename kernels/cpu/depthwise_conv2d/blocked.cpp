// depthwise_conv2d forward on CPU, blocked over channels: libtorch's tensors onto the kernel of
// kernels/core/depthwise_conv2d.h, which ExecuTorch's runtime runs too.
#include "kernels/cpu/depthwise_conv2d/blocked.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include "kernels/core/depthwise_conv2d.h"
#include "kernels/cpu/common/parallel.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

depthwise_impl::Sizes sizes_of(const conv::DepthwisePlan& p) {
  return {p.s.N, p.s.C, p.s.H, p.s.W, p.s.out_h, p.s.out_w};
}

} // namespace

bool depthwise_blocked_applies(const conv::DepthwisePlan& p) {
  // Half types compute in float, as forward's opmath_type does.
  return p.x.scalar_type() == at::kDouble ? depthwise_impl::blocked_applies<double>(sizes_of(p), p.w, p.m)
                                          : depthwise_impl::blocked_applies<float>(sizes_of(p), p.w, p.m);
}

void depthwise_forward_blocked(const conv::DepthwisePlan& p) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_conv2d_blocked_cpu", [&] {
    const scalar_t* b = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    depthwise_impl::forward_blocked<scalar_t, at::opmath_type<scalar_t>>(
        p.x.const_data_ptr<scalar_t>(), p.weight.const_data_ptr<scalar_t>(), b, p.out.data_ptr<scalar_t>(),
        sizes_of(p), p.w, kParallelFor);
  });
}

} // namespace customops::cpu::CPU_CAPABILITY
