// fold family: im2col (torch.nn.functional.unfold) and col2im (fold).
//
// im2col turns every kernel-sized window of an (N, C, H, W) image into a column
// of an (N, C*kh*kw, L) matrix, L = out_h * out_w windows, rows ordered
// (c, i, j) and columns (oh, ow); col2im sums such columns back into an image.
// Each is the other's gradient.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>

#include <vector>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"
#include "kernels/core/fold.h"

namespace customops {

namespace fold {

using checks::holds;

// A tensor's sizes as Int: concrete in the kernels, possibly symbolic in Meta.
inline c10::ArrayRef<int64_t> sizes_of(const at::Tensor& t, int64_t) {
  return t.sizes();
}
inline c10::SymIntArrayRef sizes_of(const at::Tensor& t, const c10::SymInt&) {
  return t.sym_sizes();
}

Window window(const char* op, at::IntArrayRef kernel_size, at::IntArrayRef dilation, at::IntArrayRef padding,
              at::IntArrayRef stride);

// Number of window positions along one axis of the given size; checks that the
// kernel fits in the padded input. Int is int64_t (kernels) or c10::SymInt (Meta).
// window() has checked that 2*p and d*(k-1) fit int64, so `rest` below does
// too and only its sum with the size may overflow (huge padding), or that sum's positions (a size of 2^63 - 1).
template <typename Int>
Int positions(const char* op, const char* axis, const Int& size, int64_t k, int64_t d, int64_t p, int64_t s) {
  const int64_t rest = 2 * p - d * (k - 1) - 1;  // in [-2^63, 2^63 - 2]: both terms are non-negative
  if (const auto n = checks::known(size)) {
    const auto span = checks::add(*n, rest);  // extent left for the window's origin
    TORCH_CHECK(span.has_value(), "customops::", op, ": padding (", p, ") makes the padded input ", axis, " (", *n,
                " + 2*", p, ") overflow int64");
    TORCH_CHECK(*span >= 0, "customops::", op, ": the kernel (", k, " with dilation ", d,
                ") is larger than the padded input ", axis, " (", *n, " + 2*", p, ")");
    const auto count = checks::add(*span / s, 1);  // the span itself can be 2^63 - 1 (with stride 1)
    TORCH_CHECK(count.has_value(), "customops::", op, ": the number of window positions along the ", axis, " (",
                *n, " + 2*", p, " padding, stride ", s, ") overflows int64");
    return Int(*count);
  }
  const Int span = size + rest;
  TORCH_CHECK(holds(span >= 0), "customops::", op, ": the kernel (", k, " with dilation ", d,
              ") is larger than the padded input ", axis, " (", size, " + 2*", p, ")");
  return span / s + 1;
}

// out_h * out_w, the number of kernel windows, or an error naming the
// arguments that made it overflow int64.
template <typename Int>
Int windows(const char* op, const Int& out_h, const Int& out_w) {
  const auto h = checks::known(out_h), w = checks::known(out_w);
  TORCH_CHECK(!h.has_value() || !w.has_value() || checks::mul(*h, *w).has_value(), "customops::", op,
              ": the number of kernel windows (", out_h, " x ", out_w,
              ") overflows int64 (from the input's size, padding, stride and dilation)");
  return out_h * out_w;
}

template <typename Int>
struct ColumnsGeometry {
  Int channels, out_h, out_w;
};

// Channels and window counts of a col2im: columns of input_sizes (..., C*kh*kw,
// L) summed into an image of output_size; checks that L windows fit it. `op`,
// `input` and `size` name the op and its arguments (im2col_backward calls
// them grad_out and input_size).
template <typename Int>
ColumnsGeometry<Int> col2im_geometry(const char* op, const char* input, const char* size,
                                     c10::ArrayRef<Int> input_sizes, c10::ArrayRef<Int> output_size,
                                     const Window& w) {
  TORCH_CHECK(output_size.size() == 2, "customops::", op, ": expected ", size,
              " to have 2 elements (height, width), got ", output_size.size());
  TORCH_CHECK(holds(output_size[0] > 0) && holds(output_size[1] > 0), "customops::", op, ": expected ", size,
              " to be positive, got ", output_size);
  const Int out_h = positions(op, "height", output_size[0], w.kh, w.dh, w.ph, w.sh);
  const Int out_w = positions(op, "width", output_size[1], w.kw, w.dw, w.pw, w.sw);
  const Int count = windows(op, out_h, out_w);
  const Int& columns = input_sizes[input_sizes.size() - 1];
  TORCH_CHECK(holds(columns == count), "customops::", op, ": expected ", input, "'s last dimension to be ", count,
              " (", out_h, " x ", out_w, " kernel windows in ", size, " ", output_size, "), got ", columns);
  return {input_sizes[input_sizes.size() - 2] / (w.kh * w.kw), out_h, out_w};
}

template <typename Int>
ColumnsGeometry<Int> col2im_geometry(c10::ArrayRef<Int> input_sizes, c10::ArrayRef<Int> output_size,
                                     const Window& w) {
  return col2im_geometry<Int>("col2im", "input", "output_size", input_sizes, output_size, w);
}

// Checks rank, dtype and non-empty C, H, W of an im2col input (`arg`: its name).
void check_image(const char* op, const char* arg, const at::Tensor& input);
inline void check_image(const char* op, const at::Tensor& input) {
  check_image(op, "input", input);
}
// Checks rank and dtype of a col2im input and that it holds C*kh*kw rows of L columns.
void check_columns(const char* op, const char* arg, const at::Tensor& input, const Window& w);
inline void check_columns(const char* op, const at::Tensor& input, const Window& w) {
  check_columns(op, "input", input, w);
}

// Every argument of an im2col (or col2im_backward: op, and `arg` for its
// input's name) checked, and its result's sizes.
template <typename Int>
std::vector<Int> im2col_sizes(const char* op, const char* arg, const at::Tensor& input, const Window& w) {
  check_image(op, arg, input);
  const auto in = sizes_of(input, Int{});
  const Int out_h = positions(op, "height", in[in.size() - 2], w.kh, w.dh, w.ph, w.sh);
  const Int out_w = positions(op, "width", in[in.size() - 1], w.kw, w.dw, w.pw, w.sw);
  const Int count = windows(op, out_h, out_w);
  const Int& C = in[in.size() - 3];
  if (const auto c = checks::known(C)) {
    TORCH_CHECK(checks::mul(*c, w.kh * w.kw).has_value(), "customops::", op, ": ", arg, "'s channels (", *c,
                ") times the product of kernel_size (", w.kh, " x ", w.kw, ") overflows int64");
  }
  std::vector<Int> sizes;
  if (input.dim() == 4) sizes.push_back(in[0]);
  sizes.push_back(C * (w.kh * w.kw));
  sizes.push_back(count);
  checks::result_fits<Int>(op, sizes, input, "input, kernel_size, padding, stride and dilation");
  return sizes;
}

// Every argument of a col2im (or im2col_backward, whose names op, arg and
// size give) checked, and its result's sizes.
template <typename Int>
std::vector<Int> col2im_sizes(const char* op, const char* arg, const char* size, const at::Tensor& input,
                              c10::ArrayRef<Int> output_size, const Window& w) {
  check_columns(op, arg, input, w);
  const auto geo = col2im_geometry<Int>(op, arg, size, sizes_of(input, Int{}), output_size, w);
  std::vector<Int> sizes;
  if (input.dim() == 3) sizes.push_back(sizes_of(input, Int{})[0]);
  sizes.push_back(geo.channels);
  sizes.push_back(output_size[0]);
  sizes.push_back(output_size[1]);
  checks::result_fits<Int>(op, sizes, input, size);
  return sizes;
}

// What a CPU or CUDA kernel needs once the arguments are checked: the input
// made contiguous, the output allocated (on the current device) and the sizes,
// with N = 1 for unbatched inputs.
struct Plan {
  at::Tensor input, output;
  Window w;
  int64_t N, C, H, W, out_h, out_w;
};
Plan plan_im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                 at::IntArrayRef padding, at::IntArrayRef stride);
Plan plan_col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                 at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);

} // namespace fold

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    // Fill plan.output from plan.input (a contiguous (N, ...) tensor each); the
    // convolutions call these on slices of the batch.
    void im2col_into(const fold::Plan& plan);
    void col2im_into(const fold::Plan& plan);
    at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                      at::IntArrayRef padding, at::IntArrayRef stride);
    at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                      at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);)
} // namespace cpu

namespace cuda {
void im2col_into(const fold::Plan& plan);
void col2im_into(const fold::Plan& plan);
at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride);
at::Tensor col2im(const at::Tensor& input, at::IntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);
} // namespace cuda

namespace meta {
at::Tensor im2col(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef dilation,
                  at::IntArrayRef padding, at::IntArrayRef stride);
at::Tensor col2im(const at::Tensor& input, c10::SymIntArrayRef output_size, at::IntArrayRef kernel_size,
                  at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride);
} // namespace meta

} // namespace customops
