// Schemas and CPU kernels of the stable-ABI quick_gelu prototype.
#include "quick_gelu.h"

#include <torch/csrc/stable/library.h>

#include <cstdint>

namespace customops_stable::cpu {
namespace {

// ATen's at::internal::GRAIN_SIZE: below this many elements a thread pool
// hand-off costs more than the work.
constexpr int64_t kGrainSize = 32768;

// at::vec::Vectorized is not in the stable headers (torch/headeronly/cpu/vec
// holds only conversion intrinsics), so this is a plain loop the compiler may
// vectorize, split over torch's intra-op thread pool.
template <typename scalar_t, typename Op, typename... In>
void map_dense(scalar_t* out, int64_t n, const Op& op, const In*... in) {
  using opmath_t = math::opmath_t<scalar_t>;
  torch::stable::parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = static_cast<scalar_t>(op(static_cast<opmath_t>(in[i])...));
    }
  });
}

struct Forward {
  template <typename T>
  T operator()(T x) const {
    return math::forward(x);
  }
};

struct Backward {
  template <typename T>
  T operator()(T grad, T x) const {
    return math::backward(grad, x);
  }
};

} // namespace

Tensor quick_gelu(const Tensor& x) {
  checks::quick_gelu(x);
  Tensor out = layout::elementwise_output(x);
  const Tensor xd = layout::like(x, out);
  CUSTOMOPS_STABLE_DISPATCH_FLOATING(x.scalar_type(), "quick_gelu_cpu", [&] {
    map_dense(out.mutable_data_ptr<scalar_t>(), out.numel(), Forward{}, xd.const_data_ptr<scalar_t>());
  });
  return out;
}

Tensor quick_gelu_backward(const Tensor& grad_out, const Tensor& x) {
  checks::quick_gelu_backward(grad_out, x);
  Tensor out = layout::elementwise_output(x);
  const Tensor xd = layout::like(x, out);
  const Tensor gd = layout::like(grad_out, out);
  CUSTOMOPS_STABLE_DISPATCH_FLOATING(x.scalar_type(), "quick_gelu_backward_cpu", [&] {
    map_dense(out.mutable_data_ptr<scalar_t>(), out.numel(), Backward{}, gd.const_data_ptr<scalar_t>(),
              xd.const_data_ptr<scalar_t>());
  });
  return out;
}

} // namespace customops_stable::cpu

// A namespace of its own, so this library can be loaded beside libcustomops.
// The stable def() takes no tags before torch 2.12, so the ops are not marked
// pt2_compliant_tag as the full library's are.
STABLE_TORCH_LIBRARY(customops_stable, m) {
  m.def("quick_gelu(Tensor x) -> Tensor");
  m.def("quick_gelu_backward(Tensor grad_out, Tensor x) -> Tensor");
}

// TORCH_BOX turns the typed kernel into the boxed (StableIValue stack) form,
// which is all the stable registration API accepts.
STABLE_TORCH_LIBRARY_IMPL(customops_stable, CPU, m) {
  m.impl("quick_gelu", TORCH_BOX(&customops_stable::cpu::quick_gelu));
  m.impl("quick_gelu_backward", TORCH_BOX(&customops_stable::cpu::quick_gelu_backward));
}
