// The CPU kernels of a pointwise family (kernels/common/pointwise.h), defined once
// for every family: a family's kernels/cpu/<family>.cpp instantiates them.
#pragma once

#include "kernels/common/pointwise.h"
#include "kernels/common/pointwise_kernels.h"
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

inline constexpr auto kMap = [](at::Device, const auto& out, int64_t n, const auto& op, const auto*... in) {
  map_dense(out, n, op, in...);
};

template <typename F, std::size_t... I>
at::Tensor Pointwise<F, std::index_sequence<I...>>::forward(pw::TensorArg<I>... xs) {
  return pw::run_forward<F>(kMap, xs...);
}

template <typename F, std::size_t... I>
pw::Grads<F> Pointwise<F, std::index_sequence<I...>>::backward(const at::Tensor& grad_out, pw::TensorArg<I>... xs) {
  return pw::run_backward<F>(kMap, grad_out, xs...);
}

} // namespace customops::cpu::CPU_CAPABILITY
