#include "kernels/quick_gelu.h"

#include "kernels/cuda/common/pointwise.cuh"

template struct customops::cuda::Pointwise<customops::QuickGelu>;
