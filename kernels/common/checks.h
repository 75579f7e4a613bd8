// Argument checks shared by every backend's kernels (CPU, CUDA and Meta run the
// same checks, so torch.compile reports bad inputs at trace time too).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymBool.h>

namespace customops::checks {

// A condition on sizes that may be symbolic (Meta kernels under
// torch.compile(dynamic=True)): a symbolic one is decided, and guarded on.
inline bool holds(bool b) {
  return b;
}
inline bool holds(const c10::SymBool& b) {
  return b.guard_bool(__FILE__, __LINE__);
}

// t must be float16, bfloat16, float32 or float64.
void floating(const char* op, const char* arg, const at::Tensor& t);
// a and b on one device.
void same_device(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                 const at::Tensor& b);
void same_dtype(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                const at::Tensor& b);
void same_shape(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                const at::Tensor& b);

} // namespace customops::checks
