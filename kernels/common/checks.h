// Argument checks shared by every backend's kernels (CPU, CUDA and Meta run the
// same checks, so torch.compile reports bad inputs at trace time too).
#pragma once

#include <ATen/core/Tensor.h>

namespace customops::checks {

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
