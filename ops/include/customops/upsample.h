#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

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
at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size,
                               c10::string_view coordinate_mode = "half_pixel");

// Gradient of upsample_bilinear2d for an input of spatial size input_size
// (H, W): each input pixel gathers the output gradients that read it, in a fixed
// order (no atomics), so it is deterministic on CPU and CUDA.
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                        c10::string_view coordinate_mode = "half_pixel");

} // namespace customops
