// conv2d on CUDA: the shared GEMM formulation over the CUDA fold kernels, on
// the input's device and the current stream (which ATen's bmm also uses).
#include <c10/cuda/CUDAGuard.h>

#include "kernels/conv2d.h"

namespace customops::cuda {
namespace {

const conv::FoldKernels kFold{&im2col_into, &col2im_into};

} // namespace

at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  conv::check_devices("conv2d", input, weight, bias);
  const c10::cuda::CUDAGuard guard(input.device());
  return conv::gemm_forward(kFold, input, weight, bias, stride, padding, dilation, groups);
}

conv::Grads conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                            int64_t groups, std::array<bool, 3> output_mask) {
  conv::check_devices("conv2d_backward", input, weight, std::nullopt, grad_out);
  const c10::cuda::CUDAGuard guard(input.device());
  return conv::gemm_backward(kFold, grad_out, input, weight, stride, padding, dilation, groups, output_mask);
}

} // namespace customops::cuda
