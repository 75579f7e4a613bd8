// conv2d's implicit-GEMM path on Hopper (kernels/cuda/conv2d/implicit_*_sm90.cu, CUTLASS 3.x): the im2col
// gather happens inside the GEMM (TMA im2col loads straight into shared memory), so no column buffer is
// written. Host functions only: conv2d.cu, built for every architecture in TORCH_CUDA_ARCH_LIST, calls
// them; the kernels themselves are built for sm_90a alone, and only when CUTLASS's headers were found
// (CUSTOMOPS_WITH_SM90_CONV).
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

namespace customops::cuda::implicit_gemm {

// Sizes of one 2-D convolution with one group: activations N x H x W x C, filters K x R x S x C.
struct Geometry {
  int64_t N, H, W, C, K, R, S, P, Q;
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
};

// Whether padding, stride and dilation fit the int that every CUDA conv2d kernel holds them in (CUTLASS's problem
// shape, the direct kernels' parameters): a larger one was truncated (2^32 + 1 to 1), and the kernel computed
// another convolution than the one asked for. The supports() and takes() of each path refuse g where not.
inline bool window_fits_int32(const Geometry& g) {
  return std::max({g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w}) <= std::numeric_limits<int32_t>::max();
}

// Why the implicit path does not take a call (kNone: it does), for the debug log and the tests.
enum class Refusal {
  kNone, kForced, kNotBuilt, kDevice, kDtype, kTf32Off, kGroups, kAlignment, kSize, kStride, kPadding, kPointwise, kCutlass,
  kSlower
};
const char* describe(Refusal r);

// What the kernels take, before any tensor is touched: dtype (float16, bfloat16, float32 as TF32 when
// allow_tf32), one group, channel counts that keep 16-byte rows (C and K multiples of 8 for half types,
// 4 for float32), sizes that fit CUTLASS's 32-bit problem shape, a device of compute capability 9.0.
// `pass_` picks the kernel: the forward, the input gradient (unit stride; float32 runs it as the TF32 forward
// of grad_out with the flipped filter, which needs padding <= dilation * (kernel - 1)) or the weight gradient
// (half types). `channels_last`: the input's layout (NCHW calls are converted to channels_last and back by the
// caller). 1x1 unit-stride unpadded convolutions are plain GEMMs: their gradients, and their forward on NCHW
// memory, go to cuBLAS unless CUSTOMOPS_CONV2D_ALGO=implicit.
enum class Pass { kForward, kInputGrad, kWeightGrad };
Refusal supports(const at::Tensor& input, const Geometry& g, int64_t groups, Pass pass_, bool channels_last,
                 bool allow_tf32);

// y = conv(x, w) + bias, all channels_last (x: NHWC, w: KRSC, y: NPQK in memory, dense); bias may be
// undefined. Returns kCutlass (nothing launched) if CUTLASS's can_implement refuses the problem.
Refusal forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
                const Geometry& g);

// grad_input = conv_transpose(grad_out, w), unit stride; grad_out NPQK, w KRSC, grad_input NHWC (dense).
Refusal input_grad(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g);

// The weight gradient's GEMM (M: output channels, N: R*S*C filter taps, reduced over the pixels) in tiles of
// M x N, and how many batch chunks it runs as (CUTLASS's SM90 convolutions have no split-K: each chunk is a
// launch of its own, on its own stream, writing float32 partial sums).
enum class WeightGradTile { k64x64, k128x64, k128x128 };
struct WeightGradPlan {
  WeightGradTile tile;
  int64_t splits;
};
// Chosen by a wave model (conv2d.cu); `sms`: the device's SM count, `most_splits`: the largest split allowed.
WeightGradPlan plan_weight_grad(const Geometry& g, int64_t sms, int64_t most_splits);

// The weight gradient of one batch chunk (g.N images), summed over its pixels in float32: grad_out NPQK,
// x NHWC (dense, the chunk's first image), partial a dense float32 KRSC buffer. `like`: a tensor of the
// operands' dtype and device. Half types only (no TF32 kernel for this operand order). Raw pointers, so that
// a chunk costs the host no tensor views.
Refusal weight_grad(const void* grad_out, const void* x, float* partial, const Geometry& g, WeightGradTile tile,
                    const at::Tensor& like);

} // namespace customops::cuda::implicit_gemm
