#include <customops/trilinear.h>

#include "ops/src/trilinear_ops.h"

namespace customops {

at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points) {
  return detail::trilinear_interpolation_op().call(feats, points);
}

std::tuple<at::Tensor, at::Tensor> trilinear_interpolation_backward(const at::Tensor& grad_out,
                                                                    const at::Tensor& feats,
                                                                    const at::Tensor& points,
                                                                    std::array<bool, 2> output_mask) {
  return detail::trilinear_interpolation_backward_op().call(grad_out, feats, points, output_mask);
}

} // namespace customops
