#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/fold.cpp) call the ops through them.
namespace customops::detail {

// im2col and col2im_backward: (input, kernel_size, dilation, padding, stride).
using UnfoldSignature =
    at::Tensor(const at::Tensor&, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef);
// col2im and im2col_backward: (input, spatial size, kernel_size, dilation, padding, stride).
using FoldSignature = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                 at::IntArrayRef, at::IntArrayRef);

inline const c10::TypedOperatorHandle<UnfoldSignature>& im2col_op() {
  static const auto op = find_op<UnfoldSignature>("customops::im2col");
  return op;
}

inline const c10::TypedOperatorHandle<UnfoldSignature>& col2im_backward_op() {
  static const auto op = find_op<UnfoldSignature>("customops::col2im_backward");
  return op;
}

inline const c10::TypedOperatorHandle<FoldSignature>& col2im_op() {
  static const auto op = find_op<FoldSignature>("customops::col2im");
  return op;
}

inline const c10::TypedOperatorHandle<FoldSignature>& im2col_backward_op() {
  static const auto op = find_op<FoldSignature>("customops::im2col_backward");
  return op;
}

} // namespace customops::detail

namespace customops {

// Sliding-window columns of an image, as torch::nn::functional::unfold: input
// (N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L) or (C*kh*kw, L), with
// L = out_h * out_w windows; rows ordered (c, i, j), columns (oh, ow), zeros
// where a window covers padding. All four floating dtypes, CPU and CUDA.
inline at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                         at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::im2col_op().call(input, kernel_size, dilation, padding, stride);
}

// Sums columns back into an image of output_size (H, W), as
// torch::nn::functional::fold: the adjoint of im2col. Deterministic (gathers,
// no atomics).
inline at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                         at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::col2im_op().call(input, c10::fromIntArrayRefSlow(output_size), kernel_size, dilation, padding,
                                  stride);
}

// Gradient of im2col for an input of spatial size input_size (= col2im).
inline at::Tensor im2col_backward(const at::Tensor& grad_out, at::IntArrayRef input_size, at::IntArrayRef kernel_size,
                                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::im2col_backward_op().call(grad_out, c10::fromIntArrayRefSlow(input_size), kernel_size, dilation,
                                           padding, stride);
}

// Gradient of col2im (= im2col).
inline at::Tensor col2im_backward(const at::Tensor& grad_out, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                                  at::IntArrayRef padding, at::IntArrayRef stride) {
  return detail::col2im_backward_op().call(grad_out, kernel_size, dilation, padding, stride);
}

} // namespace customops
