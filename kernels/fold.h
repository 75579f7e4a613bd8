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

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"

namespace customops {

namespace fold {

using checks::holds;

// Window parameters, validated; each is {height, width}.
struct Window {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Window window(const char* op, at::IntArrayRef kernel_size, at::IntArrayRef dilation, at::IntArrayRef padding,
              at::IntArrayRef stride);

// Number of window positions along one axis of the given size; checks that the
// kernel fits in the padded input. Int is int64_t (kernels) or c10::SymInt (Meta).
template <typename Int>
Int positions(const char* op, const char* axis, const Int& size, int64_t k, int64_t d, int64_t p, int64_t s) {
  const Int span = size + 2 * p - d * (k - 1) - 1;  // extent left for the window's origin
  TORCH_CHECK(holds(span >= 0), "customops::", op, ": the kernel (", k, " with dilation ", d,
              ") is larger than the padded input ", axis, " (", size, " + 2*", p, ")");
  return span / s + 1;
}

template <typename Int>
struct ColumnsGeometry {
  Int channels, out_h, out_w;
};

// Channels and window counts of a col2im: columns of input_sizes (..., C*kh*kw,
// L) summed into an image of output_size; checks that L windows fit it.
template <typename Int>
ColumnsGeometry<Int> col2im_geometry(c10::ArrayRef<Int> input_sizes, c10::ArrayRef<Int> output_size,
                                     const Window& w) {
  TORCH_CHECK(output_size.size() == 2, "customops::col2im: expected output_size to have 2 elements (height, ",
              "width), got ", output_size.size());
  TORCH_CHECK(holds(output_size[0] > 0) && holds(output_size[1] > 0),
              "customops::col2im: expected output_size to be positive, got ", output_size);
  const Int out_h = positions("col2im", "height", output_size[0], w.kh, w.dh, w.ph, w.sh);
  const Int out_w = positions("col2im", "width", output_size[1], w.kw, w.dw, w.pw, w.sw);
  const Int& columns = input_sizes[input_sizes.size() - 1];
  TORCH_CHECK(holds(columns == out_h * out_w), "customops::col2im: expected input's last dimension to be ",
              out_h * out_w, " (", out_h, " x ", out_w, " kernel windows in output_size ", output_size, "), got ",
              columns);
  return {input_sizes[input_sizes.size() - 2] / (w.kh * w.kw), out_h, out_w};
}

// Checks rank, dtype and non-empty C, H, W of an im2col input.
void check_image(const char* op, const at::Tensor& input);
// Checks rank and dtype of a col2im input and that it holds C*kh*kw rows of L columns.
void check_columns(const char* op, const at::Tensor& input, const Window& w);

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
