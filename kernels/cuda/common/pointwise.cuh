// The CUDA kernels of a pointwise family (kernels/common/pointwise.h), defined once
// for every family: a family's kernels/cuda/<family>.cu instantiates them.
#pragma once

#include "kernels/common/pointwise.h"
#include "kernels/common/pointwise_kernels.h"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/elementwise.cuh"

namespace customops::cuda {

// On the inputs' device and its current stream.
inline constexpr auto kMap = [](at::Device device, const auto& out, int64_t n, const auto& op, const auto*... in) {
  const KernelGuard guard(device);
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

} // namespace customops::cuda
