#include "kernels/quick_gelu.h"

#include <ATen/Dispatch.h>
#include "kernels/cuda/common/device_guard.h"

#include "kernels/common/elementwise_layout.h"
#include "kernels/cuda/common/elementwise.cuh"

namespace customops::cuda {
namespace {

namespace qm = quick_gelu_math;

struct Forward {
  template <typename T>
  __device__ T operator()(T x) const {
    return qm::forward(x);
  }
};

struct Backward {
  template <typename T>
  __device__ T operator()(T grad, T x) const {
    return qm::backward(grad, x);
  }
};

} // namespace

at::Tensor quick_gelu(const at::Tensor& x) {
  checks::quick_gelu(x);
  const KernelGuard guard(x.device());
  const auto xd = layout::dense(x);
  auto out = layout::elementwise_output(xd);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "quick_gelu_cuda", [&] {
    map_dense(out.data_ptr<scalar_t>(), xd.numel(), Forward{}, xd.const_data_ptr<scalar_t>());
  });
  return out;
}

at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  checks::quick_gelu_backward(grad_out, x);
  const KernelGuard guard(x.device());
  const auto xd = layout::dense(x);
  const auto gd = layout::match_strides(grad_out, xd);
  auto out = layout::elementwise_output(xd);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "quick_gelu_backward_cuda", [&] {
    map_dense(out.data_ptr<scalar_t>(), xd.numel(), Backward{}, gd.const_data_ptr<scalar_t>(),
              xd.const_data_ptr<scalar_t>());
  });
  return out;
}

} // namespace customops::cuda
