// Output shapes and layouts of the upsample ops from symbolic sizes.
#include "kernels/upsample.h"

#include <ATen/ops/empty.h>

namespace customops::meta {
namespace {

at::Tensor resized(const at::Tensor& t, c10::SymIntArrayRef size) {
  return at::empty_symint({t.sym_size(0), t.sym_size(1), size[0], size[1]},
                          t.options().memory_format(upsample::result_format(t)));
}

} // namespace

at::Tensor upsample_bilinear2d(const at::Tensor& input, c10::SymIntArrayRef output_size, c10::string_view mode) {
  const char* op = "upsample_bilinear2d";
  upsample::parse_mode(op, mode);
  upsample::check_input(op, "input", input);
  upsample::check_size<c10::SymInt>(op, "output_size", output_size);
  upsample::check_result<c10::SymInt>(op, "output_size", input, output_size);
  return resized(input, output_size);
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, c10::SymIntArrayRef input_size,
                                        c10::string_view mode) {
  const char* op = "upsample_bilinear2d_backward";
  upsample::parse_mode(op, mode);
  upsample::check_input(op, "grad_out", grad_out);
  upsample::check_size<c10::SymInt>(op, "input_size", input_size);
  upsample::check_result<c10::SymInt>(op, "input_size", grad_out, input_size);
  return resized(grad_out, input_size);
}

} // namespace customops::meta
