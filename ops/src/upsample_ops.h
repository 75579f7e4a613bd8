// Typed handles of the upsample family's operators, shared by the public API
// (ops/src/upsample.cpp) and the autograd kernels (registration/upsample.cpp).
#pragma once

#include <c10/core/SymIntArrayRef.h>
#include <c10/util/string_view.h>

#include <customops/detail/find_op.h>

namespace customops::detail {

// upsample_bilinear2d and its backward: (tensor, spatial size, coordinate_mode).
using ResizeSignature = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view);

inline const c10::TypedOperatorHandle<ResizeSignature>& upsample_bilinear2d_op() {
  static const auto op = find_op<ResizeSignature>("customops::upsample_bilinear2d");
  return op;
}

inline const c10::TypedOperatorHandle<ResizeSignature>& upsample_bilinear2d_backward_op() {
  static const auto op = find_op<ResizeSignature>("customops::upsample_bilinear2d_backward");
  return op;
}

} // namespace customops::detail
