#include "kernels/trilinear.h"

#include <ATen/ops/empty.h>

namespace customops::meta {

at::Tensor trilinear_interpolation(const at::Tensor& feats, const at::Tensor& points) {
  trilinear::check("trilinear_interpolation", feats, points);
  // scaffold: the result's (symbolic) shape and the strides the kernels give it | return at::empty_symint({0}, feats.options());  // TODO(trilinear_interpolation)
  return at::empty_symint({feats.sym_size(0), feats.sym_size(2)}, feats.options());
  // scaffold-end
}

trilinear::Grads trilinear_interpolation_backward(const at::Tensor& grad_out, const at::Tensor& feats,
                                                  const at::Tensor& points, std::array<bool, 2> output_mask) {
  trilinear::check("trilinear_interpolation_backward", feats, points);
  trilinear::check_grad_out(grad_out, feats);
  at::Tensor gf, gp;
  // scaffold: the gradients' shapes and strides |
  if (output_mask[0]) gf = at::empty_symint(feats.sym_sizes(), feats.options());
  if (output_mask[1]) gp = at::empty_symint(points.sym_sizes(), points.options());
  // scaffold-end
  return {gf, gp};
}

} // namespace customops::meta
