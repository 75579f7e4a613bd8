// conv2d's implicit-GEMM input gradient on Hopper, unit stride, half types (see implicit_sm90.cuh for the
// kernel and the GEMM view; TF32 runs as a forward, conv2d.cu).
#include "kernels/cuda/conv2d/implicit_sm90.cuh"

namespace customops::cuda::implicit_gemm {
namespace {

// The GEMM's N is the input channels; the tiles follow the forward's rule for them (sm90::choose).
template <class Element>
Refusal dispatch(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g) {
  return sm90::run_choice<cutlass::conv::Operator::kDgrad, Element, sm90::TileN64, sm90::TileN128, 4>(
      sm90::choose(g.C), [&](auto kernel) {
        return sm90::run<decltype(kernel)>(g, grad_out.const_data_ptr(), w.const_data_ptr(), nullptr,
                                           grad_input.data_ptr(), grad_out);
      });
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
