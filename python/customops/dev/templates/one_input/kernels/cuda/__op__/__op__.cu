// The CUDA kernels of __op__: one thread per element of the result, computed by the family's maths
// (kernels/__op__.h), in grid-stride loops with 64-bit indices. Where the benchmark shows the need, a faster
// kernel (vectorized loads, a block sharing a tile of x) replaces them.
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
__global__ void __launch_bounds__(kThreads) forward_kernel(const scalar_t* __restrict__ x,
                                                           scalar_t* __restrict__ out, __op___impl::Sizes s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < s.out_numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = static_cast<scalar_t>(__op___impl::forward_element(x, s, i));
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) backward_kernel(const scalar_t* __restrict__ grad,
                                                            const scalar_t* __restrict__ x,
                                                            scalar_t* __restrict__ grad_x, __op___impl::Sizes s) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < s.numel;
       j += int64_t(gridDim.x) * blockDim.x) {
    grad_x[j] = static_cast<scalar_t>(__op___impl::backward_element(grad, x, s, j));
  }
}

} // namespace

at::Tensor __op__(const at::Tensor& x_in) {
  // The plan checks the arguments and their devices before anything runs; the guard is for the launch.
  const auto plan = __op___impl::plan_forward(x_in);
  const KernelGuard guard(x_in.device());
  const at::Tensor &x = plan.x, &out = plan.result;
  if (out.numel() == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "__op___cuda", [&] {
    forward_kernel<scalar_t><<<launch::blocks_for(out.numel()), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), plan.sizes);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor __op___backward(const at::Tensor& grad_in, const at::Tensor& x_in) {
  const auto plan = __op___impl::plan_backward(grad_in, x_in);
  const KernelGuard guard(x_in.device());
  const at::Tensor &grad = plan.grad, &x = plan.x, &grad_x = plan.result;
  if (grad_x.numel() == 0) return grad_x;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "__op___backward_cuda", [&] {
    backward_kernel<scalar_t>
        <<<launch::blocks_for(grad_x.numel()), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            grad.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), grad_x.data_ptr<scalar_t>(),
            plan.sizes);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_x;
}

} // namespace customops::cuda
