#include <customops/fold.h>

#include <c10/core/SymIntArrayRef.h>

#include "ops/src/find_op.h"

namespace customops {
namespace {

using Unfold = at::Tensor(const at::Tensor&, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef);
using Fold = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                        at::IntArrayRef);

} // namespace

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  static const auto op = detail::find_op<Unfold>("customops::im2col");
  return op.call(input, kernel_size, dilation, padding, stride);
}

at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  static const auto op = detail::find_op<Fold>("customops::col2im");
  return op.call(input, c10::fromIntArrayRefSlow(output_size), kernel_size, dilation, padding, stride);
}

at::Tensor im2col_backward(const at::Tensor& grad_out, at::IntArrayRef input_size, at::IntArrayRef kernel_size,
                           at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  static const auto op = detail::find_op<Fold>("customops::im2col_backward");
  return op.call(grad_out, c10::fromIntArrayRefSlow(input_size), kernel_size, dilation, padding, stride);
}

at::Tensor col2im_backward(const at::Tensor& grad_out, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                           at::IntArrayRef padding, at::IntArrayRef stride) {
  static const auto op = detail::find_op<Unfold>("customops::col2im_backward");
  return op.call(grad_out, kernel_size, dilation, padding, stride);
}

} // namespace customops
