#include "kernels/silu_mul.h"

#include "kernels/cuda/common/pointwise.cuh"

template struct customops::cuda::Pointwise<customops::SiluMul>;
