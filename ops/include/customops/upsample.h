#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/util/string_view.h>

#include <customops/detail/find_op.h>

// The typed handles of the operators, looked up once per program or library that calls them: the API below
// and the autograd kernels (registration/upsample.cpp) call the ops through them.
namespace customops::detail {

// upsample_bilinear2d and its backward: (tensor, spatial size, coordinate_mode).
using ResizeSignature = at::Tensor(const at::Tensor&, c10::SymIntArrayRef, c10::string_view);

inline const c10::TypedOperatorHandle<ResizeSignature>& upsample_bilinear2d_op() {
  static const auto op = find_op<ResizeSignature>("customops::upsample_bilinear2d");
  return op;
}

inline const c10::TypedOperatorHandle<ResizeSignature>& upsample_bilinear2d_backward_op() {
  static const auto op = find_op<ResizeSignature>("customops::upsample_bilinear2d_backward");
  return op;
}

} // namespace customops::detail

namespace customops {

// Bilinear resize of an (N, C, H, W) tensor to output_size (out_h, out_w), up or
// down by any ratio. coordinate_mode says where output pixel o samples the
// input, per axis:
//   "half_pixel"    src = (o + 0.5) * in/out - 0.5, clamped at 0: F.interpolate(
//                   mode="bilinear", align_corners=False) and TF2 tf.image.resize;
//   "align_corners" src = o * (in - 1)/(out - 1): align_corners=True in both;
//   "asymmetric"    src = o * in/out: TF1 tf.image.resize_bilinear(align_corners=False).
// A channels_last input gives a channels_last result. All four floating
// dtypes, CPU and CUDA (half types computed in float).
inline at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size,
                                      c10::string_view coordinate_mode = "half_pixel") {
  return detail::upsample_bilinear2d_op().call(input, c10::fromIntArrayRefSlow(output_size), coordinate_mode);
}

// Gradient of upsample_bilinear2d for an input of spatial size input_size
// (H, W): each input pixel gathers the output gradients that read it, in a fixed
// order (no atomics), so it is deterministic on CPU and CUDA.
inline at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                               c10::string_view coordinate_mode = "half_pixel") {
  return detail::upsample_bilinear2d_backward_op().call(grad_out, c10::fromIntArrayRefSlow(input_size),
                                                        coordinate_mode);
}

} // namespace customops
