// Output shapes of im2col/col2im from symbolic sizes (torch.compile dynamic=True).
#include "kernels/fold.h"

#include <ATen/ops/empty.h>

namespace customops::meta {

at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto w = fold::window("im2col", kernel_size, dilation, padding, stride);
  fold::check_image("im2col", input);
  const auto oh = fold::positions<c10::SymInt>("im2col", "height", input.sym_size(-2), w.kh, w.dh, w.ph, w.sh);
  const auto ow = fold::positions<c10::SymInt>("im2col", "width", input.sym_size(-1), w.kw, w.dw, w.pw, w.sw);
  const auto rows = input.sym_size(-3) * (w.kh * w.kw);
  if (input.dim() == 4) {
    return at::empty_symint({input.sym_size(0), rows, oh * ow}, input.options());
  }
  return at::empty_symint({rows, oh * ow}, input.options());
}

at::Tensor col2im(const at::Tensor& input, c10::SymIntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  const auto w = fold::window("col2im", kernel_size, dilation, padding, stride);
  fold::check_columns("col2im", input, w);
  const auto geo = fold::col2im_geometry<c10::SymInt>(input.sym_sizes(), output_size, w);
  if (input.dim() == 3) {
    return at::empty_symint({input.sym_size(0), geo.channels, output_size[0], output_size[1]}, input.options());
  }
  return at::empty_symint({geo.channels, output_size[0], output_size[1]}, input.options());
}

} // namespace customops::meta
