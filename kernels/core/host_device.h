// For kernels/core/: the pieces of a family's maths that run in more than one runtime (libtorch's CPU and CUDA
// kernels, ExecuTorch's kernels), so they include neither ATen nor c10, whose copies differ between the two.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define CUSTOMOPS_HOST_DEVICE __host__ __device__
#else
#define CUSTOMOPS_HOST_DEVICE
#endif
