// The formulas of the pointwise operators (kernels/<op>.h) and what they may call, with no ATen: libtorch's
// kernels (kernels/common/pointwise.h) and ExecuTorch's (kernels/executorch/pointwise.h) evaluate the same text.
// See kernels/common/pointwise.h for what a family defines.
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>
#include <cstddef>
#include <type_traits>

namespace customops {
namespace pw {

// N values of one type: a family's derivatives (a plain aggregate, usable in device code).
template <typename T, std::size_t N>
struct Values {
  T v[N];
  C10_HOST_DEVICE T& operator[](std::size_t i) { return v[i]; }
  C10_HOST_DEVICE const T& operator[](std::size_t i) const { return v[i]; }
};

// The functions a formula may call, per value type; scalars here, the other types where
// they are used (SIMD vectors in the CPU kernels, tensors in the registration).
template <typename T, typename = void>
struct Maths {
  C10_HOST_DEVICE static T exp(T x) {
    using std::exp;
    return exp(x);
  }
  C10_HOST_DEVICE static T tanh(T x) {
    using std::tanh;
    return tanh(x);
  }
  // 1 / (1 + exp(-x)): for very negative x the exponential overflows to inf and the
  // quotient is 0, never NaN.
  C10_HOST_DEVICE static T sigmoid(T x) {
    return T(1) / (T(1) + exp(-x));
  }
};

template <typename T>
C10_HOST_DEVICE inline T exp(const T& x) {
  return Maths<T>::exp(x);
}
template <typename T>
C10_HOST_DEVICE inline T tanh(const T& x) {
  return Maths<T>::tanh(x);
}
template <typename T>
C10_HOST_DEVICE inline T sigmoid(const T& x) {
  return Maths<T>::sigmoid(x);
}

// The base of every pointwise op's struct of formulas (kernels/<op>.h): what makes a header an op's for
// cmake/CustomopsPointwise.cmake, which writes the op's kernels and registration from it, so that a header that
// only uses these functions (shared formulas, helpers) is not taken for one.
struct Formula {};

template <typename F>
constexpr std::size_t checked_arity() {
  static_assert(std::is_base_of_v<Formula, F>,
                "a pointwise op's struct derives from customops::pw::Formula (cmake/CustomopsPointwise.cmake)");
  return std::extent_v<decltype(F::kInputs)>;
}

template <typename F>
constexpr std::size_t arity = checked_arity<F>();

// The map of the forward op and of the backward op: f(x...), and grad_out * df/dxi for each i.
template <typename F>
struct ForwardMap {
  template <typename V, typename... Vs>
  C10_HOST_DEVICE Values<V, 1> operator()(const V& x, const Vs&... xs) const {
    return {F::forward(x, xs...)};
  }
};

template <typename F>
struct BackwardMap {
  template <typename V, typename... Vs>
  C10_HOST_DEVICE auto operator()(const V& grad, const Vs&... xs) const {
    auto d = F::derivatives(xs...);
    for (std::size_t i = 0; i < sizeof...(Vs); ++i) d[i] = grad * d[i];
    return d;
  }
};

} // namespace pw
} // namespace customops
