// <op>.out of a pointwise family in ExecuTorch's runtime: the checks of kernels/common/pointwise.h on ExecuTorch's
// tensors (floating, one dtype, one shape), out resized to the inputs' shape, then the forward of the build this
// processor runs (isa/pointwise.h). cmake/CustomopsPointwise.cmake registers it for every pointwise family.
#pragma once

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "kernels/core/pointwise.h"
#include "kernels/executorch/common.h"
#include "kernels/executorch/isa.h"

namespace customops::executorch_kernels {

template <std::size_t>
struct TensorFor {
  using type = const Tensor&;
};

// A scalar argument's type in ExecuTorch's kernel signatures, as the schema's maps to it.
template <pw::ArgType>
struct ArgCpp;
template <>
struct ArgCpp<pw::ArgType::Float> {
  using type = double;
};
template <>
struct ArgCpp<pw::ArgType::Int> {
  using type = int64_t;
};
template <>
struct ArgCpp<pw::ArgType::Bool> {
  using type = bool;
};
template <>
struct ArgCpp<pw::ArgType::Choice> {
  using type = ::executorch::aten::string_view;
};
template <typename F, std::size_t K>
using ArgArg = typename ArgCpp<F::kArgs[K].type>::type;

// An argument's value as the formulas take it (pw::Arg), or NaN where it is out of its range or options.
inline double arg_value(const pw::Arg& arg, double v) {
  return arg.accepts(v) ? v : std::numeric_limits<double>::quiet_NaN();
}
inline double arg_value(const pw::Arg& arg, int64_t v) {
  return arg_value(arg, static_cast<double>(v));
}
inline double arg_value(const pw::Arg&, bool v) {
  return v ? 1 : 0;
}
inline double arg_value(const pw::Arg& arg, ::executorch::aten::string_view v) {
  const int index = pw::choice_index(arg.options, v.data(), v.size());
  return index < 0 ? std::numeric_limits<double>::quiet_NaN() : index;
}

template <typename F, typename = std::make_index_sequence<pw::arity<F>>,
          typename = std::make_index_sequence<pw::arg_count<F>>>
struct PointwiseOut;

template <typename F, std::size_t... I, std::size_t... K>
struct PointwiseOut<F, std::index_sequence<I...>, std::index_sequence<K...>> {
  static Tensor& out(KernelRuntimeContext& ctx, typename TensorFor<I>::type... xs, ArgArg<F, K>... as, Tensor& out) {
    pw::ArgsOf<F> args{};
    if constexpr (sizeof...(K) > 0) {
      args = {{arg_value(F::kArgs[K], as)...}};
      for (std::size_t k = 0; k < sizeof...(K); ++k) {
        ET_KERNEL_CHECK_MSG(ctx, args[k] == args[k], InvalidArgument, out,
                            "customops::%s: %s out of its range (or not one of its options)", F::kName,
                            F::kArgs[k].name);
      }
    }
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
    CUSTOMOPS_ET_KERNEL(PointwiseForward<F>::run)(ctx, inputs, args, out);
    return out;
  }
};

} // namespace customops::executorch_kernels
