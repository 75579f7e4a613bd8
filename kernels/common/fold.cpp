#include "kernels/fold.h"

#include <c10/util/Exception.h>

namespace customops::fold {
namespace {

void check_pair(const char* op, const char* arg, at::IntArrayRef v, int64_t min, const char* expected) {
  TORCH_CHECK(v.size() == 2, "customops::", op, ": expected ", arg, " to have 2 elements (height, width), got ",
              v.size());
  TORCH_CHECK(v[0] >= min && v[1] >= min, "customops::", op, ": expected ", arg, " to be ", expected, ", got ",
              v);
}

} // namespace

Window window(const char* op, at::IntArrayRef kernel_size, at::IntArrayRef dilation, at::IntArrayRef padding,
              at::IntArrayRef stride) {
  check_pair(op, "kernel_size", kernel_size, 1, "positive");
  check_pair(op, "dilation", dilation, 1, "positive");
  check_pair(op, "padding", padding, 0, "non-negative");
  check_pair(op, "stride", stride, 1, "positive");
  return {kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]};
}

void check_image(const char* op, const at::Tensor& input) {
  checks::floating(op, "input", input);
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "customops::", op,
              ": expected input to be a 3-D (C, H, W) or 4-D (N, C, H, W) tensor, got ", input.dim(), "-D");
  // A batch of 0 images is fine; an image of no pixels or channels is not.
  for (int64_t d = -3; d < 0; ++d) {
    TORCH_CHECK(holds(input.sym_size(d) > 0), "customops::", op,
                ": expected input to have non-empty C, H and W dimensions, got ", input.sym_sizes());
  }
}

void check_columns(const char* op, const at::Tensor& input, const Window& w) {
  checks::floating(op, "input", input);
  TORCH_CHECK(input.dim() == 2 || input.dim() == 3, "customops::", op,
              ": expected input to be a 2-D (C*kh*kw, L) or 3-D (N, C*kh*kw, L) tensor, got ", input.dim(), "-D");
  const auto rows = input.sym_size(-2);
  TORCH_CHECK(holds(rows > 0 && rows % (w.kh * w.kw) == 0), "customops::", op,
              ": expected input's dimension ", input.dim() - 2, " (", rows,
              ") to be a positive multiple of kernel_size's product (", w.kh * w.kw, ")");
}

} // namespace customops::fold
