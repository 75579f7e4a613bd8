// conv2d's implicit-GEMM input gradient on Hopper, unit stride, half types (see conv2d_implicit_sm90.cuh for the
// kernel and the GEMM view; TF32 runs as a forward, conv2d.cu).
#include "kernels/cuda/conv2d_implicit_sm90.cuh"

namespace customops::cuda::implicit_gemm {
namespace {

using cute::_1;
using cute::_128;
using cute::_2;
using cute::_64;
using cute::Shape;
using cutlass::conv::Operator;
using sm90::Kernel;
using sm90::run;

using TileN64 = Shape<_128, _64, Shape<_64>>;
using TileN128 = Shape<_128, _128, Shape<_64>>;
using PairN = Shape<_1, _2, _1>;

// The GEMM's N is the input channels; the tiles follow the forward's rule for them (H100, float16, queued:
// 256 channels at 56x56, 1.31x -> 1.16x cuDNN's time in pairs; 128 channels 1.04x alone, 2.20x in pairs).
template <class Element>
Refusal dispatch(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g) {
  const auto go = [&](auto kernel) {
    return run<decltype(kernel)>(g, grad_out.const_data_ptr(), w.const_data_ptr(), nullptr, grad_input.data_ptr(),
                                 grad_out);
  };
  if (g.C <= 64) return go(Kernel<Operator::kDgrad, Element, TileN64, 4>{});
  if ((g.C + 127) / 128 % 2 == 0) return go(Kernel<Operator::kDgrad, Element, TileN128, 0, PairN>{});
  return go(Kernel<Operator::kDgrad, Element, TileN128>{});
}

} // namespace

Refusal input_grad(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g) {
  switch (grad_out.scalar_type()) {
    case at::kHalf: return dispatch<cutlass::half_t>(grad_out, w, grad_input, g);
    case at::kBFloat16: return dispatch<cutlass::bfloat16_t>(grad_out, w, grad_input, g);
    default: return Refusal::kDtype;
  }
}

} // namespace customops::cuda::implicit_gemm
