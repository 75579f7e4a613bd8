// The CPU kernels of a pointwise family (kernels/common/pointwise.h), defined once
// for every family: a family's kernels/cpu/<family>.cpp instantiates them.
#pragma once

#include <ATen/Dispatch.h>

#include <array>
#include <tuple>

#include "kernels/common/elementwise_layout.h"
#include "kernels/common/pointwise.h"
#include "kernels/cpu/common/elementwise.h"

namespace customops::pw {

// The formulas' functions on SIMD vectors (exp_u20: ATen's vectorised exp, within 20 ulp).
template <typename T>
struct Maths<at::vec::Vectorized<T>> {
  using V = at::vec::Vectorized<T>;
  static V exp(const V& x) {
    return x.exp_u20();
  }
  static V tanh(const V& x) {
    return x.tanh();
  }
  static V sigmoid(const V& x) {
    const V one(T(1));
    return one / (one + x.neg().exp_u20());
  }
};

} // namespace customops::pw

namespace customops::cpu::CPU_CAPABILITY {

template <typename F, std::size_t... I>
at::Tensor Pointwise<F, std::index_sequence<I...>>::forward(pw::TensorArg<I>... xs) {
  pw::check_forward<F>(xs...);
  const auto first = layout::dense(std::get<0>(std::tie(xs...)));
  const at::Tensor dense[] = {layout::match_strides(xs, first)...};
  auto out = layout::elementwise_output(first);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), F::kName, [&] {
    map_dense<scalar_t, 1>({out.template data_ptr<scalar_t>()}, first.numel(), pw::ForwardMap<F>{},
                           dense[I].template const_data_ptr<scalar_t>()...);
  });
  return out;
}

template <typename F, std::size_t... I>
pw::Grads<F> Pointwise<F, std::index_sequence<I...>>::backward(const at::Tensor& grad_out, pw::TensorArg<I>... xs) {
  pw::check_backward<F>(grad_out, xs...);
  const auto first = layout::dense(std::get<0>(std::tie(xs...)));
  const auto grad = layout::match_strides(grad_out, first);
  const at::Tensor dense[] = {layout::match_strides(xs, first)...};
  std::array<at::Tensor, sizeof...(I)> grads = {layout::elementwise_output(dense[I])...};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), F::kName, [&] {
    map_dense<scalar_t, sizeof...(I)>({grads[I].template data_ptr<scalar_t>()...}, first.numel(),
                                      pw::BackwardMap<F>{}, grad.template const_data_ptr<scalar_t>(),
                                      dense[I].template const_data_ptr<scalar_t>()...);
  });
  return pw::as_grads(grads);
}

} // namespace customops::cpu::CPU_CAPABILITY
