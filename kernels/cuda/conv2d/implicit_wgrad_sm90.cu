// conv2d's implicit-GEMM weight gradient on Hopper, half types, one batch chunk per call (see
// implicit_sm90.cuh for the kernel and the GEMM view; conv2d.cu plans the tile and the chunks).
#include "kernels/cuda/conv2d/implicit_sm90.cuh"

namespace customops::cuda::implicit_gemm {
namespace {

using cute::_128;
using cute::_64;
using cute::Shape;
using cutlass::conv::Operator;
using sm90::Kernel;
using sm90::run;

// (output channels, filter taps, pixels per reduction step); the reduction is over the chunk's pixels.
using Tile64x64 = Shape<_64, Shape<_64>, Shape<_64>>;
using Tile128x64 = Shape<_128, Shape<_64>, Shape<_64>>;
using Tile128x128 = Shape<_128, Shape<_128>, Shape<_64>>;

template <class Element>
Refusal dispatch(const void* grad_out, const void* x, float* partial, const Geometry& g, WeightGradTile tile,
                 const at::Tensor& like) {
  const auto go = [&](auto kernel) { return run<decltype(kernel)>(g, grad_out, x, nullptr, partial, like); };
  switch (tile) {
    case WeightGradTile::k64x64: return go(Kernel<Operator::kWgrad, Element, Tile64x64>{});
    case WeightGradTile::k128x64: return go(Kernel<Operator::kWgrad, Element, Tile128x64>{});
    case WeightGradTile::k128x128: return go(Kernel<Operator::kWgrad, Element, Tile128x128>{});
  }
  return Refusal::kCutlass;
}

} // namespace

Refusal weight_grad(const void* grad_out, const void* x, float* partial, const Geometry& g, WeightGradTile tile,
                    const at::Tensor& like) {
  switch (like.scalar_type()) {
    case at::kHalf: return dispatch<cutlass::half_t>(grad_out, x, partial, g, tile, like);
    case at::kBFloat16: return dispatch<cutlass::bfloat16_t>(grad_out, x, partial, g, tile, like);
    default: return Refusal::kDtype;
  }
}

} // namespace customops::cuda::implicit_gemm
