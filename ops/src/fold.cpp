#include <customops/fold.h>

#include "ops/src/fold_ops.h"

namespace customops {

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::im2col_op().call(input, kernel_size, dilation, padding, stride);
}

at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::col2im_op().call(input, c10::fromIntArrayRefSlow(output_size), kernel_size, dilation, padding,
                                  stride);
}

at::Tensor im2col_backward(const at::Tensor& grad_out, at::IntArrayRef input_size, at::IntArrayRef kernel_size,
                           at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::im2col_backward_op().call(grad_out, c10::fromIntArrayRefSlow(input_size), kernel_size, dilation,
                                           padding, stride);
}

at::Tensor col2im_backward(const at::Tensor& grad_out, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                           at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::col2im_backward_op().call(grad_out, kernel_size, dilation, padding, stride);
}

} // namespace customops
