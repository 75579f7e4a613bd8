// Typed handles of the fold family's operators, looked up once and shared by the
// public API (ops/src/fold.cpp) and the autograd kernels (registration/fold.cpp).
#pragma once

#include <c10/core/SymIntArrayRef.h>

#include <customops/detail/find_op.h>

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
