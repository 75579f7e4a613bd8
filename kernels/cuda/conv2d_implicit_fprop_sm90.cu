// conv2d's implicit-GEMM forward on Hopper: tiles per dtype and output channel count (see
// conv2d_implicit_sm90.cuh for the kernel and the GEMM view). The input gradient in TF32 runs through here too
// (conv2d.cu: the forward of grad_out with the flipped filter).
#include "kernels/cuda/conv2d_implicit_sm90.cuh"

namespace customops::cuda::implicit_gemm {
namespace {

using cute::_1;
using cute::_128;
using cute::_2;
using cute::_32;
using cute::_64;
using cute::Shape;
using cutlass::conv::Operator;
using sm90::Kernel;
using sm90::run;

// 128 output pixels x 64 or 128 output channels; half types slice the reduction 64 deep, float32 (TF32,
// 4-byte elements) 32 deep, for the same shared-memory stage size.
using TileN64 = Shape<_128, _64, Shape<_64>>;
using TileN128 = Shape<_128, _128, Shape<_64>>;
using TileTf32N64 = Shape<_128, _64, Shape<_32>>;
using TileTf32N128 = Shape<_128, _128, Shape<_32>>;
using PairN = Shape<_1, _2, _1>;  // two CTAs along the output channels share the activation tile

enum class Choice { kN64, kN128, kN128Pair };

// Measured on an H100 (queued, float16, TF32 alike; prof tile runs over 19 3x3 shapes, ResNet-50's at batch
// 16-256 among them): up to 64 output channels the narrow tile with four stages, so that two CTAs share an SM
// (with the automatic count one CTA fills the shared memory and the GPU stalls between tiles: 64 -> 64 channels
// at 56x56, 1.50x cuDNN's time against 1.20x); past 64 the wide tile, in pairs where the channel tiles pair up
// (256 -> 256 channels at 56x56: 1.28x -> 1.14x cuDNN's in float16, 2.19x -> 1.04x in TF32 against the narrow
// tile used before; an odd tile count leaves half a pair idle: 384 channels 1.26x alone, 1.77x in pairs).
Choice choose(int64_t out_channels) {
  if (out_channels <= 64) return Choice::kN64;
  return (out_channels + 127) / 128 % 2 == 0 ? Choice::kN128Pair : Choice::kN128;
}

// NarrowStages: the narrow tile's pipeline depth (0: as many as fit; TF32 was measured with that only).
template <class Element, class Tile, class TileWide, int NarrowStages>
Refusal dispatch(Choice c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
                 const Geometry& g) {
  const auto go = [&](auto kernel) {
    return run<decltype(kernel)>(g, x.const_data_ptr(), w.const_data_ptr(),
                                 bias.defined() ? bias.const_data_ptr() : nullptr, y.data_ptr(), x);
  };
  switch (c) {
    case Choice::kN64: return go(Kernel<Operator::kFprop, Element, Tile, NarrowStages>{});
    case Choice::kN128: return go(Kernel<Operator::kFprop, Element, TileWide>{});
    case Choice::kN128Pair: return go(Kernel<Operator::kFprop, Element, TileWide, 0, PairN>{});
  }
  return Refusal::kCutlass;
}

} // namespace

Refusal forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
                const Geometry& g) {
  const Choice c = choose(g.K);
  switch (x.scalar_type()) {
    case at::kHalf: return dispatch<cutlass::half_t, TileN64, TileN128, 4>(c, x, w, bias, y, g);
    case at::kBFloat16: return dispatch<cutlass::bfloat16_t, TileN64, TileN128, 4>(c, x, w, bias, y, g);
    case at::kFloat: return dispatch<float, TileTf32N64, TileTf32N128, 0>(c, x, w, bias, y, g);
    default: return Refusal::kDtype;
  }
}

} // namespace customops::cuda::implicit_gemm
