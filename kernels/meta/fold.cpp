// Output shapes of im2col/col2im from symbolic sizes (torch.compile dynamic=True).
#include "kernels/fold.h"

#include <ATen/ops/empty.h>

namespace customops::meta {

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto w = fold::window("im2col", kernel_size, dilation, padding, stride);
  return at::empty_symint(fold::im2col_sizes<c10::SymInt>("im2col", "input", input, w), input.options());
}

at::Tensor col2im(const at::Tensor& input, c10::SymIntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto w = fold::window("col2im", kernel_size, dilation, padding, stride);
  return at::empty_symint(fold::col2im_sizes<c10::SymInt>("col2im", "input", "output_size", input, output_size, w),
                          input.options());
}

} // namespace customops::meta
