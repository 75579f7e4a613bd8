// depthwise_conv2d's forward in ExecuTorch's runtime, one build per instruction set: ExecuTorch's tensors onto
// the blocked kernel of kernels/core/depthwise_conv2d.h, which libtorch's CPU kernel runs too.
#include "kernels/core/depthwise_conv2d.h"
#include "kernels/executorch/isa.h"

namespace customops::executorch_kernels::CPU_CAPABILITY {
namespace {

depthwise_impl::Sizes sizes_of(const Tensor& x, const fold::Window& w) {
  const int64_t H = x.size(2), W = x.size(3);
  return {x.size(0), x.size(1), H, W, fold::window_count(H, w.kh, w.dh, w.ph, w.sh),
          fold::window_count(W, w.kw, w.dw, w.pw, w.sw)};
}

} // namespace

bool depthwise_takes(const Tensor& x, const fold::Window& w, int64_t m) {
  // Half types compute in float.
  return x.scalar_type() == ScalarType::Double ? depthwise_impl::blocked_applies<double>(sizes_of(x, w), w, m)
                                               : depthwise_impl::blocked_applies<float>(sizes_of(x, w), w, m);
}

void depthwise_forward(KernelRuntimeContext& ctx, const Tensor& x, const Tensor& weight, const Tensor* bias,
                       const fold::Window& w, Tensor& out) {
  ET_SWITCH_FLOATHBF16_TYPES(x.scalar_type(), ctx, "depthwise_conv2d.out", scalar_t, [&] {
    depthwise_impl::forward_blocked<scalar_t, opmath_t<scalar_t>>(
        x.const_data_ptr<scalar_t>(), weight.const_data_ptr<scalar_t>(),
        bias ? bias->const_data_ptr<scalar_t>() : nullptr, out.mutable_data_ptr<scalar_t>(), sizes_of(x, w), w,
        kParallelFor);
  });
}

} // namespace customops::executorch_kernels::CPU_CAPABILITY
