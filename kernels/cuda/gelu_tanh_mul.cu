#include "kernels/gelu_tanh_mul.h"

#include "kernels/cuda/common/pointwise.cuh"

template struct customops::cuda::Pointwise<customops::GeluTanhMul>;
