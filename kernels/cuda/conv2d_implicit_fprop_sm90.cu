// conv2d's implicit-GEMM forward on Hopper: tiles per dtype and output channel count (see
// conv2d_implicit_sm90.cuh for the kernel and the GEMM view). The input gradient in TF32 runs through here too
// (conv2d.cu: the forward of grad_out with the flipped filter).
#include "kernels/cuda/conv2d_implicit_sm90.cuh"

namespace customops::cuda::implicit_gemm {
namespace {

using cutlass::conv::Operator;
using sm90::Choice;
using sm90::run;

// NarrowStages: the narrow tile's pipeline depth (0: as many as fit; TF32 was measured with that only).
template <class Element, class Tile, class TileWide, int NarrowStages>
Refusal dispatch(Choice c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
                 const Geometry& g) {
  return sm90::run_choice<Operator::kFprop, Element, Tile, TileWide, NarrowStages>(c, [&](auto kernel) {
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
    case at::kHalf: return dispatch<cutlass::half_t, TileN64, TileN128, 4>(c, x, w, bias, y, g);
    case at::kBFloat16: return dispatch<cutlass::bfloat16_t, TileN64, TileN128, 4>(c, x, w, bias, y, g);
    case at::kFloat: return dispatch<float, TileTf32N64, TileTf32N128, 0>(c, x, w, bias, y, g);
    default: return Refusal::kDtype;
  }
}

} // namespace customops::cuda::implicit_gemm
