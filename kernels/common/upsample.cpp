#include "kernels/upsample.h"

#include <ATen/ops/empty.h>

namespace customops::upsample {

Mode parse_mode(const char* op, c10::string_view mode) {
  if (mode == "half_pixel") return Mode::HalfPixel;
  if (mode == "align_corners") return Mode::AlignCorners;
  if (mode == "asymmetric") return Mode::Asymmetric;
  TORCH_CHECK(false, "customops::", op, ": unknown coordinate_mode '", std::string(mode),
              "'; expected one of half_pixel, align_corners, asymmetric");
}

void check_input(const char* op, const char* arg, const at::Tensor& t) {
  checks::floating(op, arg, t);
  TORCH_CHECK(t.dim() == 4, "customops::", op, ": expected ", arg, " to be a 4-D (N, C, H, W) tensor, got ",
              t.dim(), "-D");
  TORCH_CHECK(holds(t.sym_size(2) > 0) && holds(t.sym_size(3) > 0), "customops::", op, ": expected ", arg,
              " to have non-empty H and W, got ", t.sym_sizes());
  checks::dense_fits(op, arg, t);
}

at::MemoryFormat result_format(const at::Tensor& t) {
  return t.suggest_memory_format() == at::MemoryFormat::ChannelsLast ? at::MemoryFormat::ChannelsLast
                                                                     : at::MemoryFormat::Contiguous;
}

namespace {

Plan make_plan(const at::Tensor& input, int64_t out_h, int64_t out_w, Mode mode) {
  const auto fmt = result_format(input);
  Plan p;
  p.input = input.contiguous(fmt);
  p.output = at::empty({input.size(0), input.size(1), out_h, out_w}, input.options().memory_format(fmt));
  p.mode = mode;
  p.channels_last = fmt == at::MemoryFormat::ChannelsLast;
  p.N = input.size(0);
  p.C = input.size(1);
  p.in_h = input.size(2);
  p.in_w = input.size(3);
  p.out_h = out_h;
  p.out_w = out_w;
  return p;
}

} // namespace

Plan plan_forward(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode) {
  const char* op = "upsample_bilinear2d";
  const Mode m = parse_mode(op, mode);
  check_input(op, "input", input);
  check_size<int64_t>(op, "output_size", output_size);
  check_result<int64_t>(op, "output_size", input, output_size);
  return make_plan(input, output_size[0], output_size[1], m);
}

// The backward's plan.input is grad_out and plan.output grad_in, but its sizes
// keep the forward's names: in_* are grad_in's, out_* grad_out's.
Plan plan_backward(const at::Tensor& grad_out, at::IntArrayRef input_size, c10::string_view mode) {
  const char* op = "upsample_bilinear2d_backward";
  const Mode m = parse_mode(op, mode);
  check_input(op, "grad_out", grad_out);
  check_size<int64_t>(op, "input_size", input_size);
  check_result<int64_t>(op, "input_size", grad_out, input_size);
  Plan p = make_plan(grad_out, input_size[0], input_size[1], m);
  std::swap(p.in_h, p.out_h);
  std::swap(p.in_w, p.out_w);
  return p;
}

} // namespace customops::upsample
