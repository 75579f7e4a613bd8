// Shapes, dtypes and strides only: what torch.compile and torch.export trace.
#include "kernels/quick_gelu.h"

#include "kernels/common/elementwise_layout.h"

namespace customops::meta {

at::Tensor quick_gelu(const at::Tensor& x) {
  checks::quick_gelu(x);
  return layout::elementwise_output(x);
}

at::Tensor quick_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  checks::quick_gelu_backward(grad_out, x);
  return layout::elementwise_output(x);
}

} // namespace customops::meta
