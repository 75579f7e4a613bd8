// CUDA kernels of the stable-ABI quick_gelu prototype. Built with USE_CUDA, which
// makes the C shim declare its CUDA entry points (current stream, cuBLAS handle,
// error text).
#include "quick_gelu.h"

#include <cuda_runtime.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/macros.h>

#include <algorithm>
#include <cstdint>

namespace customops_stable::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loop: enough blocks to fill any current GPU, and no limit from
// the grid size on how many elements one launch covers.
constexpr int64_t kMaxBlocks = int64_t(1) << 16;

template <typename scalar_t, typename Op, typename... In>
__global__ void __launch_bounds__(kThreads) map_kernel(scalar_t* out, int64_t n, Op op, const In*... in) {
  using opmath_t = math::opmath_t<scalar_t>;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    out[i] = static_cast<scalar_t>(op(static_cast<opmath_t>(in[i])...));
  }
}

// at::cuda::getCurrentCUDAStream is libtorch C++; the C shim hands out the
// same stream as an opaque cudaStream_t. torch::stable::accelerator::Stream
// gains a native handle only in torch 2.13, so a 2.11 build cannot use it.
cudaStream_t current_stream(int32_t device_index) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device_index, &stream));
  return static_cast<cudaStream_t>(stream);
}

// out and every input: n elements of dense memory laid out alike, on the
// current device (the caller holds a DeviceGuard).
template <typename scalar_t, typename Op, typename... In>
void map_dense(int32_t device_index, scalar_t* out, int64_t n, const Op& op, const In*... in) {
  if (n == 0) {
    return;
  }
  const int64_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  map_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, current_stream(device_index)>>>(out, n, op, in...);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

struct Forward {
  template <typename T>
  __device__ T operator()(T x) const {
    return math::forward(x);
  }
};

struct Backward {
  template <typename T>
  __device__ T operator()(T grad, T x) const {
    return math::backward(grad, x);
  }
};

} // namespace

Tensor quick_gelu(const Tensor& x) {
  checks::quick_gelu(x);
  // Allocation, the layout copy and the launch all go to x's device and its
  // current stream, whatever device the caller has current.
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  Tensor out = layout::elementwise_output(x);
  const Tensor xd = layout::like(x, out);
  CUSTOMOPS_STABLE_DISPATCH_FLOATING(x.scalar_type(), "quick_gelu_cuda", [&] {
    map_dense(x.get_device_index(), out.mutable_data_ptr<scalar_t>(), out.numel(), Forward{},
              xd.const_data_ptr<scalar_t>());
  });
  return out;
}

Tensor quick_gelu_backward(const Tensor& grad_out, const Tensor& x) {
  checks::quick_gelu_backward(grad_out, x);
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  Tensor out = layout::elementwise_output(x);
  const Tensor xd = layout::like(x, out);
  const Tensor gd = layout::like(grad_out, out);
  CUSTOMOPS_STABLE_DISPATCH_FLOATING(x.scalar_type(), "quick_gelu_backward_cuda", [&] {
    map_dense(x.get_device_index(), out.mutable_data_ptr<scalar_t>(), out.numel(), Backward{},
              gd.const_data_ptr<scalar_t>(), xd.const_data_ptr<scalar_t>());
  });
  return out;
}

} // namespace customops_stable::cuda

STABLE_TORCH_LIBRARY_IMPL(customops_stable, CUDA, m) {
  m.impl("quick_gelu", TORCH_BOX(&customops_stable::cuda::quick_gelu));
  m.impl("quick_gelu_backward", TORCH_BOX(&customops_stable::cuda::quick_gelu_backward));
}
