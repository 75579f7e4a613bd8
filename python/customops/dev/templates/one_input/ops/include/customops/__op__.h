#pragma once

#include <ATen/core/Tensor.h>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/__op__.cpp) call the ops through them.
namespace customops::detail {

using __Op__Signature = at::Tensor(const at::Tensor&);
using __Op__BackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&);

inline const c10::TypedOperatorHandle<__Op__Signature>& __op___op() {
  static const auto op = find_op<__Op__Signature>("customops::__op__");
  return op;
}

inline const c10::TypedOperatorHandle<__Op__BackwardSignature>& __op___backward_op() {
  static const auto op = find_op<__Op__BackwardSignature>("customops::__op___backward");
  return op;
}

} // namespace customops::detail

namespace customops {

// TODO(__op__): what the op computes, its arguments, their shapes and dtypes, its result.
inline at::Tensor __op__(const at::Tensor& x) {
  return detail::__op___op().call(x);
}

// x's gradient for the upstream gradient grad_out (of the result's shape).
inline at::Tensor __op___backward(const at::Tensor& grad_out, const at::Tensor& x) {
  return detail::__op___backward_op().call(grad_out, x);
}

} // namespace customops
