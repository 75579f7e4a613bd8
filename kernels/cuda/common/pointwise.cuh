// The CUDA kernels of a pointwise family (kernels/common/pointwise.h), defined once
// for every family: a family's kernels/cuda/<family>.cu instantiates them.
#pragma once

#include <ATen/Dispatch.h>

#include <array>
#include <tuple>

#include "kernels/common/elementwise_layout.h"
#include "kernels/common/pointwise.h"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/elementwise.cuh"

namespace customops::cuda {
template <typename F, size_t... I>
at::Tensor Pointwise<F, std::index_sequence<I...>>::forward(pw::TensorArg<I>... xs) {
  pw::check_forward<F>(xs...);
  const auto& x0 = std::get<0>(std::tie(xs...));
  const KernelGuard guard(x0.device());
  const auto first = layout::dense(x0);
  const at::Tensor dense[] = {layout::match_strides(xs, first)...};
  auto out = layout::elementwise_output(first);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, first.scalar_type(), F::kName, [&] {
    map_dense<scalar_t, 1>({out.template data_ptr<scalar_t>()}, first.numel(), pw::ForwardMap<F>{},
                           dense[I].template const_data_ptr<scalar_t>()...);
  });
  return out;
}

template <typename F, size_t... I>
pw::Grads<F> Pointwise<F, std::index_sequence<I...>>::backward(const at::Tensor& grad_out, pw::TensorArg<I>... xs) {
  pw::check_backward<F>(grad_out, xs...);
  const auto& x0 = std::get<0>(std::tie(xs...));
  const KernelGuard guard(x0.device());
  const auto first = layout::dense(x0);
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

} // namespace customops::cuda
