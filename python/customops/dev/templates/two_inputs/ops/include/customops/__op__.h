#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/__op__.cpp) call the ops through them.
namespace customops::detail {

using __Op__Signature = at::Tensor(const at::Tensor&, const at::Tensor&);
using __Op__Grads = std::tuple<at::Tensor, at::Tensor>;
using __Op__BackwardSignature = __Op__Grads(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                            std::array<bool, 2>);

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
inline at::Tensor __op__(const at::Tensor& a, const at::Tensor& b) {
  return detail::__op___op().call(a, b);
}

// The gradients (d a, d b) for the upstream gradient grad_out (of the result's shape); output_mask says which
// to compute (the other is an undefined tensor).
inline std::tuple<at::Tensor, at::Tensor> __op___backward(const at::Tensor& grad_out, const at::Tensor& a,
                                                          const at::Tensor& b,
                                                          std::array<bool, 2> output_mask = {true, true}) {
  return detail::__op___backward_op().call(grad_out, a, b, output_mask);
}

} // namespace customops
