// Memory layout of elementwise ops. Kernels walk memory linearly, so every
// operand must share one dense layout: dense inputs (contiguous, channels_last,
// transposed...) keep theirs and the output copies it; anything else (slices,
// expanded tensors) is computed contiguously. The Meta kernels use the same
// rule, so fake and real outputs have identical strides.
#pragma once

#include <ATen/core/Tensor.h>

namespace customops::layout {

// x itself when it is non-overlapping and dense, else a contiguous copy.
at::Tensor dense(const at::Tensor& x);
// An uninitialised output for an elementwise op on x, in dense(x)'s layout.
at::Tensor elementwise_output(const at::Tensor& x);
// t with exactly ref's strides (ref must be dense): t itself or a copy.
at::Tensor match_strides(const at::Tensor& t, const at::Tensor& ref);

} // namespace customops::layout
