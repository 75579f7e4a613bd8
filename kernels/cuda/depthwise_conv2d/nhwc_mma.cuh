// depthwise_conv2d on CUDA, channels_last, float16 and bfloat16: the forward
// and the unit-stride input gradient on tensor cores, for windows larger than
// 3x3 up to 9x9 at unit stride (ConvNeXt's 7x7 layers).
// nhwc.cu tries it before the column, row-streaming and direct kernels.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/depthwise_conv2d/nhwc_columns.cuh"

namespace customops::cuda::depthwise_nhwc::mma {

// The problem as the column kernels take it (columns::Problem: dense NHWC
// buffers, taps flipped for the input gradient).
using columns::Problem;

// Launches the kernel and returns true where it takes the problem: float16 or
// bfloat16 on an sm_80 or later device, more than 9 taps with kh and kw at
// most 9, unit stride and dilation, m == 1, channels a multiple of 8, src and
// dst 16-byte aligned. false leaves dst untouched.
bool run(const Problem& p, cudaStream_t stream);

// Forced off by CUSTOMOPS_DEPTHWISE_ALGO=rows or =fma (read per call: tests
// and benchmarks compare them with the CUDA-core kernels).
bool enabled();

} // namespace customops::cuda::depthwise_nhwc::mma
