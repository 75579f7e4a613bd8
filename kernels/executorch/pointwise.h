// <op>.out of a pointwise family in ExecuTorch's runtime: the checks of kernels/common/pointwise.h on ExecuTorch's
// tensors (floating, one dtype, one shape), out resized to the inputs' shape, then the forward of the build this
// processor runs (isa/pointwise.h). cmake/CustomopsPointwise.cmake registers it for every pointwise family.
#pragma once

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <cstddef>
#include <utility>

#include "kernels/core/pointwise.h"
#include "kernels/executorch/common.h"
#include "kernels/executorch/isa.h"

namespace customops::executorch_kernels {

template <std::size_t>
struct TensorFor {
  using type = const Tensor&;
};

template <typename F, typename = std::make_index_sequence<pw::arity<F>>>
struct PointwiseOut;

template <typename F, std::size_t... I>
struct PointwiseOut<F, std::index_sequence<I...>> {
  static Tensor& out(KernelRuntimeContext& ctx, typename TensorFor<I>::type... xs, Tensor& out) {
    const Tensor* inputs[] = {&xs...};
    const Tensor& first = *inputs[0];
    for (std::size_t i = 0; i < sizeof...(I); ++i) {
      const Tensor& x = *inputs[i];
      bool same_shape = x.dim() == first.dim();
      for (ssize_t d = 0; same_shape && d < x.dim(); ++d) same_shape = x.size(d) == first.size(d);
      ET_KERNEL_CHECK_MSG(ctx, floating(x) && x.scalar_type() != ScalarType::Double, InvalidArgument, out,
                          "customops::%s: expected %s of float32, float16 or bfloat16 (float64 is decomposed)",
                          F::kName, F::kInputs[i]);
      ET_KERNEL_CHECK_MSG(ctx, x.scalar_type() == first.scalar_type() && same_shape, InvalidArgument, out,
                          "customops::%s: expected %s of %s's dtype and shape", F::kName, F::kInputs[i],
                          F::kInputs[0]);
      ET_KERNEL_CHECK_MSG(ctx, contiguous(x), InvalidArgument, out,
                          "customops::%s: expected %s in the default dim order", F::kName, F::kInputs[i]);
    }
    ET_KERNEL_CHECK_MSG(ctx, out.scalar_type() == first.scalar_type() && contiguous(out), InvalidArgument, out,
                        "customops::%s: expected out of %s's dtype, in the default dim order", F::kName,
                        F::kInputs[0]);
    ET_KERNEL_CHECK_MSG(ctx,
                        ::executorch::runtime::resize_tensor(out, first.sizes()) == ::executorch::runtime::Error::Ok,
                        InvalidArgument, out, "customops::%s: could not resize out", F::kName);
    if (out.numel() == 0) return out;
    CUSTOMOPS_ET_KERNEL(PointwiseForward<F>::run)(ctx, inputs, out);
    return out;
  }
};

} // namespace customops::executorch_kernels
