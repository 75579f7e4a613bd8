#include "kernels/quick_gelu.h"

#include <ATen/Dispatch.h>

#include "kernels/common/elementwise_layout.h"
#include "kernels/cpu/common/elementwise.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
namespace qm = quick_gelu_math;

struct Forward {
  template <typename T>
  T operator()(T x) const {
    return qm::forward(x);
  }
  template <typename T>
  Vectorized<T> operator()(const Vectorized<T>& x) const {
    // scaffold: the forward formula on SIMD vectors (at::vec::Vectorized) | return x;
    const Vectorized<T> one(T(1)), neg_alpha(-T(qm::kAlpha));
    return x / (one + (x * neg_alpha).exp_u20());
    // scaffold-end
  }
};

struct Backward {
  template <typename T>
  T operator()(T grad, T x) const {
    return qm::backward(grad, x);
  }
  template <typename T>
  Vectorized<T> operator()(const Vectorized<T>& grad, const Vectorized<T>& x) const {
    // scaffold: the gradient on SIMD vectors | return grad;
    const Vectorized<T> one(T(1)), alpha(T(qm::kAlpha));
    const auto s = one / (one + (x * -alpha).exp_u20());
    return grad * (s + alpha * x * s * (one - s));
    // scaffold-end
  }
};

} // namespace

at::Tensor quick_gelu(const at::Tensor& x) {
  checks::quick_gelu(x);
  const auto xd = layout::dense(x);
  auto out = layout::elementwise_output(xd);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "quick_gelu_cpu", [&] {
    map_dense<scalar_t>(out.data_ptr<scalar_t>(), xd.numel(), Forward{}, xd.const_data_ptr<scalar_t>());
  });
  return out;
}

at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  checks::quick_gelu_backward(grad_out, x);
  const auto xd = layout::dense(x);
  const auto gd = layout::match_strides(grad_out, xd);
  auto out = layout::elementwise_output(xd);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "quick_gelu_backward_cpu", [&] {
    map_dense<scalar_t>(out.data_ptr<scalar_t>(), xd.numel(), Backward{}, gd.const_data_ptr<scalar_t>(),
                        xd.const_data_ptr<scalar_t>());
  });
  return out;
}

} // namespace customops::cpu::CPU_CAPABILITY
