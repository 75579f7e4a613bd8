// Bilinear resize with the three coordinate conventions of ONNX Resize.
//
// Along each axis an output index o maps to a source coordinate
//   src = max(scale * (o + off) - off, 0)
// half_pixel:    scale = in/out,              off = 0.5  (PyTorch align_corners=False, TF2)
// align_corners: scale = (in-1)/(out-1) or 0, off = 0    (align_corners=True in both)
// asymmetric:    scale = in/out,              off = 0    (TF1 resize_bilinear default)
// and blends input indices i0 = min(floor(src), in-1) and i1 = min(i0+1, in-1)
// with weights 1-l and l, l = src - i0 clamped to [0, 1]. The maths is the
// same for every mode, so the kernels take the mode as data, not as a template.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>
#include <c10/macros/Macros.h>
#include <c10/util/string_view.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/backend_choice.h"
#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"
#include "kernels/core/upsample.h"

namespace customops {

namespace upsample {

// Parses the schema's string; an unknown mode is an error listing the valid ones.
inline Mode parse_mode(const char* op, c10::string_view mode) {
  Mode m;
  if (mode_from(std::string_view(mode.data(), mode.size()), &m)) return m;
  TORCH_CHECK(false, "customops::", op, ": unknown coordinate_mode '", std::string(mode),
              "'; expected one of half_pixel, align_corners, asymmetric");
}

using checks::holds;

// Checks of upsample_bilinear2d's arguments; Int is int64_t or c10::SymInt (Meta).
inline void check_input(const char* op, const char* arg, const at::Tensor& t) {
  checks::floating(op, arg, t);
  TORCH_CHECK(t.dim() == 4, "customops::", op, ": expected ", arg, " to be a 4-D (N, C, H, W) tensor, got ",
              t.dim(), "-D");
  TORCH_CHECK(holds(t.sym_size(2) > 0) && holds(t.sym_size(3) > 0), "customops::", op, ": expected ", arg,
              " to have non-empty H and W, got ", t.sym_sizes());
  checks::dense_fits(op, arg, t);
}
template <typename Int>
void check_size(const char* op, const char* arg, c10::ArrayRef<Int> size) {
  TORCH_CHECK(size.size() == 2, "customops::", op, ": expected ", arg, " to have 2 elements (height, width), got ",
              size.size());
  TORCH_CHECK(holds(size[0] > 0) && holds(size[1] > 0), "customops::", op, ": expected ", arg, " to be positive, got [",
              size[0], ", ", size[1], "]");
}

// The result (N, C, size) of t (N, C, H, W) must be describable (checks::sizes_fit).
template <typename Int>
void check_result(const char* op, const char* arg, const at::Tensor& t, c10::ArrayRef<Int> size) {
  std::vector<Int> sizes;
  if constexpr (std::is_same_v<Int, c10::SymInt>) {
    sizes = {t.sym_size(0), t.sym_size(1), size[0], size[1]};
  } else {
    sizes = {t.size(0), t.size(1), size[0], size[1]};
  }
  checks::result_fits<Int>(op, sizes, t, arg);
}

// The layout results take: channels_last for a channels_last input, as
// F.interpolate does, else contiguous.
inline at::MemoryFormat result_format(const at::Tensor& t) {
  return t.suggest_memory_format() == at::MemoryFormat::ChannelsLast ? at::MemoryFormat::ChannelsLast
                                                                     : at::MemoryFormat::Contiguous;
}

// What a kernel needs once the arguments are checked: the input in the
// result's layout, the result allocated, and both axes' sizes.
struct Plan {
  at::Tensor input, output;
  Mode mode;
  bool channels_last;
  int64_t N, C, in_h, in_w, out_h, out_w;

  static Plan make(const at::Tensor& input, int64_t out_h, int64_t out_w, Mode mode) {
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
};

// The plan of op resizing `t` (argument `arg`) to `size` (argument `size_arg`), its arguments checked.
inline Plan checked_plan(const char* op, const char* arg, const at::Tensor& t, const char* size_arg,
                         at::IntArrayRef size, c10::string_view mode) {
  const Mode m = parse_mode(op, mode);
  check_input(op, arg, t);
  check_size<int64_t>(op, size_arg, size);
  check_result<int64_t>(op, size_arg, t, size);
  return Plan::make(t, size[0], size[1], m);
}

inline Plan plan_forward(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode) {
  return checked_plan("upsample_bilinear2d", "input", input, "output_size", output_size, mode);
}

// grad_out (N, C, out_h, out_w) -> grad_in (N, C, input_size). The plan's
// input is grad_out and its output grad_in, but its sizes keep the forward's
// names: in_* are grad_in's, out_* grad_out's.
inline Plan plan_backward(const at::Tensor& grad_out, at::IntArrayRef input_size, c10::string_view mode) {
  Plan p = checked_plan("upsample_bilinear2d_backward", "grad_out", grad_out, "input_size", input_size, mode);
  std::swap(p.in_h, p.out_h);
  std::swap(p.in_w, p.out_w);
  return p;
}

// The choice on CUDA between customops' kernels and PyTorch's (aten::upsample_bilinear2d and its backward) for
// one call (kernels/common/backend_choice.h), by the rule of kernels/common/upsample_rule.cpp where no timing
// decides. Sizes in the forward's names: in_* the input's plane, out_* the resized one.
enum class Pass { forward, backward };
struct Case {
  Pass pass;
  at::ScalarType dtype;
  bool channels_last;
  Mode mode;
  int64_t N, C, in_h, in_w, out_h, out_w;
};
inline Case make_case(Pass pass, const Plan& p, at::ScalarType dtype) {
  return {pass, dtype, p.channels_last, p.mode, p.N, p.C, p.in_h, p.in_w, p.out_h, p.out_w};
}
// Whether PyTorch's kernel computes the call: its two coordinate conventions (not asymmetric), sizes its 32-bit
// indexing holds; for the backward, whose kernel adds atomically in the gradient's dtype, no deterministic
// algorithms asked for, and in the half types no upscale.
bool has_choice(const Case& c);
backend::Impl rule(const Case& c);
std::string key(const Case& c, int device);  // the benchmark mode's record

} // namespace upsample

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode);
    at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                            c10::string_view mode);)
} // namespace cpu

namespace cuda {
at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode);
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                        c10::string_view mode);
} // namespace cuda

namespace meta {
at::Tensor upsample_bilinear2d(const at::Tensor& input, c10::SymIntArrayRef output_size, c10::string_view mode);
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, c10::SymIntArrayRef input_size,
                                        c10::string_view mode);
} // namespace meta

} // namespace customops
