#include <customops/upsample.h>

#include "ops/src/upsample_ops.h"

namespace customops {

at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size,
                               c10::string_view coordinate_mode) {
  return detail::upsample_bilinear2d_op().call(input, c10::fromIntArrayRefSlow(output_size), coordinate_mode);
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                        c10::string_view coordinate_mode) {
  return detail::upsample_bilinear2d_backward_op().call(grad_out, c10::fromIntArrayRefSlow(input_size),
                                                        coordinate_mode);
}

} // namespace customops
