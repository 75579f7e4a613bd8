// The body of a pointwise family's CPU and CUDA kernels: the checks, one dense layout for every operand, the
// outputs and the dtype dispatch. `map(device, outputs, n, op, inputs...)` is the backend's elementwise map
// (kernels/cpu/common/elementwise.h, kernels/cuda/common/elementwise.cuh) on the inputs' device, called once
// every argument is checked. `args` are the scalar arguments' values (checked by
// pw::arg_values).
#pragma once

#include <ATen/Dispatch.h>

#include <array>
#include <tuple>

#include "kernels/common/elementwise_layout.h"
#include "kernels/common/pointwise.h"

namespace customops::pw {

template <typename F, typename Map, typename... Xs>
at::Tensor run_forward(const Map& map, const ArgsOf<F>& args, const Xs&... xs) {
  check_forward<F>(xs...);
  const auto first = layout::dense(std::get<0>(std::tie(xs...)));
  const std::array<at::Tensor, sizeof...(Xs)> dense = {layout::match_strides(xs, first)...};
  auto out = layout::elementwise_output(first);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), F::kName, [&] {
    std::apply([&](const auto&... d) {
      map(first.device(), std::array<scalar_t*, 1>{out.template data_ptr<scalar_t>()}, first.numel(), ForwardMap<F>{args},
          d.template const_data_ptr<scalar_t>()...);
    }, dense);
  });
  return out;
}

template <typename F, typename Map, typename... Xs>
Grads<F> run_backward(const Map& map, const ArgsOf<F>& args, const at::Tensor& grad_out, const Xs&... xs) {
  constexpr std::size_t N = sizeof...(Xs);
  check_backward<F>(grad_out, xs...);
  const auto first = layout::dense(std::get<0>(std::tie(xs...)));
  const std::array<at::Tensor, N + 1> dense = {layout::match_strides(grad_out, first),
                                               layout::match_strides(xs, first)...};
  std::array<at::Tensor, N> grads;
  for (auto& g : grads) g = layout::elementwise_output(first);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), F::kName, [&] {
    std::array<scalar_t*, N> outs;
    for (std::size_t k = 0; k < N; ++k) outs[k] = grads[k].template data_ptr<scalar_t>();
    std::apply([&](const auto&... d) {
      map(first.device(), outs, first.numel(), BackwardMap<F>{args}, d.template const_data_ptr<scalar_t>()...);
    }, dense);
  });
  return as_grads(grads);
}

} // namespace customops::pw
