// The Meta kernels of a pointwise family (shapes, dtypes and strides only: what
// torch.compile and torch.export trace), with the CPU and CUDA kernels' layout rule.
#pragma once

#include <array>
#include <tuple>

#include "kernels/common/elementwise_layout.h"
#include "kernels/common/pointwise.h"

namespace customops::meta {

template <typename F, std::size_t... I, std::size_t... K>
at::Tensor Pointwise<F, std::index_sequence<I...>, std::index_sequence<K...>>::forward(pw::TensorArg<I>... xs,
                                                                                     pw::ArgArg<F, K>... args) {
  pw::arg_values<F>(F::kName, args...);
  pw::check_forward<F>(xs...);
  return layout::elementwise_output(std::get<0>(std::tie(xs...)));
}

template <typename F, std::size_t... I, std::size_t... K>
pw::Grads<F> Pointwise<F, std::index_sequence<I...>, std::index_sequence<K...>>::backward(
    const at::Tensor& grad_out, pw::TensorArg<I>... xs, pw::ArgArg<F, K>... args) {
  pw::arg_values<F>(pw::backward_name(F::kName).c_str(), args...);
  pw::check_backward<F>(grad_out, xs...);
  const auto& first = std::get<0>(std::tie(xs...));
  return pw::as_grads(std::array<at::Tensor, sizeof...(I)>{(static_cast<void>(I), layout::elementwise_output(first))...});
}

} // namespace customops::meta
