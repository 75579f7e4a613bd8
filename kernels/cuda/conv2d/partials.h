// The last step of conv2d's weight gradients on CUDA that split the reduction over pixels (the grouped, stem and
// TF32 kernels' blocks, the implicit GEMM's batch chunks): float32 partial sums added in a fixed order, rounded
// once to the weight's dtype and written in its memory format, by one kernel (partials.cu).
#pragma once

#include <ATen/core/Tensor.h>

namespace customops::cuda {

// How a part's (K, C, R, S) sums are laid out: KCRS (the direct kernels) or KRSC (the implicit GEMM's NHWC filter).
enum class PartialLayout { kKCRS, kKRSC };

// The weight gradient, (K, C / groups, R, S) in weight's dtype and suggested memory format, from float32 partial
// sums (parts, then one filter in `layout`): added in a fixed order (up to 16 parts one after another; more in
// eight running sums, part j after part j - 8, then the eight in order).
at::Tensor sum_weight_partials(const at::Tensor& partial, const at::Tensor& weight,
                               PartialLayout layout = PartialLayout::kKCRS);

} // namespace customops::cuda
