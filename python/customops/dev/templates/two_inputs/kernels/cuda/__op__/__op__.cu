// The CUDA kernels of __op__: one thread per element of the result and of each gradient asked for, computed by
// the family's maths (kernels/__op__.h), in grid-stride loops with 64-bit indices. Where the benchmark shows the
// need, a faster kernel (vectorized loads, a block sharing a tile of the inputs) replaces them.
#include "kernels/__op__.h"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace customops::cuda {
namespace {

using launch::kThreads;

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) forward_kernel(const scalar_t* __restrict__ a,
                                                           const scalar_t* __restrict__ b,
                                                           scalar_t* __restrict__ out, __op___impl::Sizes s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s.out_numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(__op___impl::forward_element(a, b, s, i));
  }
}

// The gradient of a (for_a) or of b, one thread per element of it.
template <typename scalar_t, bool for_a>
__global__ void __launch_bounds__(kThreads) grad_kernel(const scalar_t* __restrict__ grad,
                                                        const scalar_t* __restrict__ a,
                                                        const scalar_t* __restrict__ b,
                                                        scalar_t* __restrict__ result, int64_t n,
                                                        __op___impl::Sizes s) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (for_a) {
      result[j] = static_cast<scalar_t>(__op___impl::grad_a_element(grad, a, b, s, j));
    } else {
      result[j] = static_cast<scalar_t>(__op___impl::grad_b_element(grad, a, b, s, j));
    }
  }
}

} // namespace

at::Tensor __op__(const at::Tensor& a_in, const at::Tensor& b_in) {
  // The plan checks the arguments and their devices before anything runs; the guard is for the launch.
  const auto plan = __op___impl::plan_forward(a_in, b_in);
  const KernelGuard guard(a_in.device());
  const at::Tensor &a = plan.a, &b = plan.b, &out = plan.result;
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "__op___cuda", [&] {
    forward_kernel<scalar_t><<<launch::blocks_for(out.numel()), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), plan.sizes);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

__op___impl::Grads __op___backward(const at::Tensor& grad_in, const at::Tensor& a_in, const at::Tensor& b_in,
                                   std::array<bool, 2> output_mask) {
  const auto plan = __op___impl::plan_backward(grad_in, a_in, b_in, output_mask);
  const KernelGuard guard(a_in.device());
  const at::Tensor &grad = plan.grad, &a = plan.a, &b = plan.b;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "__op___backward_cuda", [&] {
    const auto stream = at::cuda::getCurrentCUDAStream();
    const scalar_t* gp = grad.const_data_ptr<scalar_t>();
    const scalar_t* ap = a.const_data_ptr<scalar_t>();
    const scalar_t* bp = b.const_data_ptr<scalar_t>();
    if (plan.grad_a.defined() && plan.grad_a.numel() > 0) {
      const int64_t n = plan.grad_a.numel();
      grad_kernel<scalar_t, true><<<launch::blocks_for(n), kThreads, 0, stream>>>(
          gp, ap, bp, plan.grad_a.data_ptr<scalar_t>(), n, plan.sizes);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (plan.grad_b.defined() && plan.grad_b.numel() > 0) {
      const int64_t n = plan.grad_b.numel();
      grad_kernel<scalar_t, false><<<launch::blocks_for(n), kThreads, 0, stream>>>(
          gp, ap, bp, plan.grad_b.data_ptr<scalar_t>(), n, plan.sizes);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {plan.grad_a, plan.grad_b};
}

} // namespace customops::cuda
