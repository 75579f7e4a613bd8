// Typed handles of trilinear_interpolation and its backward, shared by the
// public API (ops/src/trilinear.cpp) and the autograd kernels.
#pragma once

#include <array>
#include <tuple>

#include <customops/detail/find_op.h>

namespace customops::detail {

using TrilinearSignature = at::Tensor(const at::Tensor&, const at::Tensor&);
using TrilinearGrads = std::tuple<at::Tensor, at::Tensor>;
using TrilinearBackwardSignature = TrilinearGrads(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                  std::array<bool, 2>);

inline const c10::TypedOperatorHandle<TrilinearSignature>& trilinear_interpolation_op() {
  static const auto op = find_op<TrilinearSignature>("customops::trilinear_interpolation");
  return op;
}

inline const c10::TypedOperatorHandle<TrilinearBackwardSignature>& trilinear_interpolation_backward_op() {
  static const auto op = find_op<TrilinearBackwardSignature>("customops::trilinear_interpolation_backward");
  return op;
}

} // namespace customops::detail
