#include "kernels/common/elementwise_layout.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

namespace customops::layout {

at::Tensor dense(const at::Tensor& x) {
  return x.is_non_overlapping_and_dense() ? x : x.contiguous();
}

at::Tensor elementwise_output(const at::Tensor& x) {
  // empty_like preserves the exact strides of a non-overlapping dense tensor.
  return x.is_non_overlapping_and_dense() ? at::empty_like(x)
                                          : at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor match_strides(const at::Tensor& t, const at::Tensor& ref) {
  if (t.sym_strides() == ref.sym_strides() && t.is_non_overlapping_and_dense()) {
    return t;
  }
  return at::empty_like(ref, t.options()).copy_(t);
}

} // namespace customops::layout
