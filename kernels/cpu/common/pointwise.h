// The CPU kernels of a pointwise family (kernels/common/pointwise.h), defined once
// for every family: a family's kernels/cpu/<family>.cpp instantiates them.
#pragma once

#include "kernels/common/pointwise.h"
#include "kernels/common/pointwise_kernels.h"
#include "kernels/cpu/common/elementwise.h"

namespace customops::cpu::CPU_CAPABILITY {

inline constexpr auto kMap = [](at::Device, const auto& out, int64_t n, const auto& op, const auto*... in) {
  map_dense(out, n, op, in...);
};

template <typename F, std::size_t... I, std::size_t... K>
at::Tensor Pointwise<F, std::index_sequence<I...>, std::index_sequence<K...>>::forward(pw::TensorArg<I>... xs,
                                                                                     pw::ArgArg<F, K>... args) {
  return pw::run_forward<F>(kMap, pw::arg_values<F>(F::kName, args...), xs...);
}

template <typename F, std::size_t... I, std::size_t... K>
pw::Grads<F> Pointwise<F, std::index_sequence<I...>, std::index_sequence<K...>>::backward(
    const at::Tensor& grad_out, pw::TensorArg<I>... xs, pw::ArgArg<F, K>... args) {
  return pw::run_backward<F>(kMap, pw::arg_values<F>(pw::backward_name(F::kName).c_str(), args...), grad_out,
                             xs...);
}

} // namespace customops::cpu::CPU_CAPABILITY
