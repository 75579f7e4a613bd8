// Conversions between NCHW and NHWC memory on CUDA. ATen's copy into channels_last strides (Tensor::contiguous)
// writes with a stride of C elements and ran at 0.4-0.65 TB/s on an H100; the convolutions convert their
// activations on every call, so they use this tiled transpose instead.
#pragma once

#include <ATen/core/Tensor.h>

namespace customops::cuda {

// t in `format` (Contiguous, or ChannelsLast for a 4-D t): t itself when it already is; a transpose through
// shared memory between dense NCHW and dense NHWC; ATen's copy for other strides.
at::Tensor to_format(const at::Tensor& t, at::MemoryFormat format);

} // namespace customops::cuda
