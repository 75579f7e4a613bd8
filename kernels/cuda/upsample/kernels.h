// customops' CUDA kernels of upsample_bilinear2d (upsample.cu), on a checked plan whose output is allocated;
// choice.cpp calls them or PyTorch's.
#pragma once

#include "kernels/upsample.h"

namespace customops::cuda {
void upsample_forward_kernels(const upsample::Plan& plan);
void upsample_backward_kernels(const upsample::Plan& plan);  // plan from upsample::plan_backward
}  // namespace customops::cuda
