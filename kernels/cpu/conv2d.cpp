// conv2d on CPU: the shared GEMM formulation over this build's fold kernels.
#include "kernels/conv2d.h"

namespace customops::cpu::CPU_CAPABILITY {
namespace {

at::Tensor to_format(const at::Tensor& t, at::MemoryFormat format) {
  return t.contiguous(format);
}

const conv::GemmBackend kBackend{&im2col_into, &col2im_into, &to_format};

} // namespace

at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return conv::gemm_forward(kBackend, input, weight, bias, stride, padding, dilation, groups);
}

conv::Grads conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                            int64_t groups, std::array<bool, 3> output_mask) {
  return conv::gemm_backward(kBackend, grad_out, input, weight, stride, padding, dilation, groups, output_mask);
}

} // namespace customops::cpu::CPU_CAPABILITY
