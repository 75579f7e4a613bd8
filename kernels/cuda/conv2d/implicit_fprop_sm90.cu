// conv2d's implicit-GEMM forward on Hopper: tiles per dtype and output channel count (see
// implicit_sm90.cuh for the kernel and the GEMM view). The input gradient in TF32 runs through here too
// (conv2d.cu: the forward of grad_out with the flipped filter).
#include "kernels/cuda/conv2d/implicit_sm90.cuh"

namespace customops::cuda::implicit_gemm {
namespace {

using cutlass::conv::Operator;
using sm90::Choice;
using sm90::run;

// The narrow tile with four stages, two CTAs an SM, in every dtype (see sm90::choose; TF32 64 -> 64 channels at
// 56x56, batch 64, on an H100: forward 0.105 -> 0.091 ms and the input gradient through here 0.112 -> 0.098
// against as many stages as fit).
template <class Element, class Tile, class TileWide>
Refusal dispatch(Choice c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
                 const Geometry& g) {
  return sm90::run_choice<Operator::kFprop, Element, Tile, TileWide, 4>(c, [&](auto kernel) {
    return run<decltype(kernel)>(g, x.const_data_ptr(), w.const_data_ptr(),
                                 bias.defined() ? bias.const_data_ptr() : nullptr, y.data_ptr(), x);
  });
}

} // namespace

Refusal forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
                const Geometry& g) {
  using sm90::TileN128;
  using sm90::TileN64;
  using sm90::TileTf32N128;
  using sm90::TileTf32N64;
  const Choice c = sm90::choose(g.K);
  switch (x.scalar_type()) {
    case at::kHalf: return dispatch<cutlass::half_t, TileN64, TileN128>(c, x, w, bias, y, g);
    case at::kBFloat16: return dispatch<cutlass::bfloat16_t, TileN64, TileN128>(c, x, w, bias, y, g);
    case at::kFloat: return dispatch<float, TileTf32N64, TileTf32N128>(c, x, w, bias, y, g);
    default: return Refusal::kDtype;
  }
}

} // namespace customops::cuda::implicit_gemm
