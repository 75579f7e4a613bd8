// The formulas of the pointwise operators (kernels/<op>.h) and what they may call, with no ATen: libtorch's
// kernels (kernels/common/pointwise.h) and ExecuTorch's (kernels/executorch/pointwise.h) evaluate the same text.
// See kernels/common/pointwise.h for what a family defines.
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>
#include <cstddef>
#include <limits>
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

// A scalar argument of a pointwise op (its struct's kArgs, in the schema's order after the tensors): its name, its
// type and the range of its valid values, which the kernels of every runtime check. The formulas receive every
// argument as a double, pw::Args<K> in kArgs' order: a float's or an int's value, a bool's 0 or 1, a choice's index
// among its options. The schema (registration/schemas.cpp) gives each its type there (float, int, bool, str) and
// its default.
enum class ArgType { Float, Int, Bool, Choice };

struct Arg {
  const char* name;
  ArgType type = ArgType::Float;
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool low_open = false, high_open = false;  // whether low (high) itself is out of the range
  const char* options = nullptr;              // a choice's options, comma-separated ("none,tanh")

  static constexpr Arg real(const char* name) { return Arg{name, ArgType::Float}; }
  static constexpr Arg integer(const char* name) { return Arg{name, ArgType::Int}; }
  static constexpr Arg boolean(const char* name) { return Arg{name, ArgType::Bool}; }
  static constexpr Arg choice(const char* name, const char* options) {
    Arg a{name, ArgType::Choice};
    a.options = options;
    return a;
  }
  // The range, as `Arg::real("cap").gt(0)`, `Arg::integer("n").ge(1).le(8)`.
  constexpr Arg gt(double v) const { return bound(v, true, true); }
  constexpr Arg ge(double v) const { return bound(v, true, false); }
  constexpr Arg lt(double v) const { return bound(v, false, true); }
  constexpr Arg le(double v) const { return bound(v, false, false); }

  C10_HOST_DEVICE constexpr bool accepts(double v) const {
    return (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
  }

 private:
  constexpr Arg bound(double v, bool lower, bool open) const {
    Arg a = *this;
    (lower ? a.low : a.high) = v;
    (lower ? a.low_open : a.high_open) = open;
    return a;
  }
};

// The arguments' values as the formulas take them (see Arg); an op without arguments has none (its formulas take
// its tensors' values alone).
template <std::size_t K>
using Args = Values<double, K>;
struct NoArgs {};

template <typename F, typename = void>
struct ArgCount : std::integral_constant<std::size_t, 0> {};
template <typename F>
struct ArgCount<F, std::void_t<decltype(F::kArgs)>> : std::extent<decltype(F::kArgs)> {};

template <typename F>
constexpr std::size_t arg_count = ArgCount<F>::value;

template <typename F>
using ArgsOf = std::conditional_t<arg_count<F> == 0, NoArgs, Args<arg_count<F> == 0 ? 1 : arg_count<F>>>;

// F's formulas called with its arguments' values, where it has any.
template <typename F, typename... Vs>
C10_HOST_DEVICE auto forward_of(const ArgsOf<F>& a, const Vs&... xs) {
  if constexpr (arg_count<F> == 0) {
    return F::forward(xs...);
  } else {
    return F::forward(a, xs...);
  }
}
template <typename F, typename... Vs>
C10_HOST_DEVICE auto derivatives_of(const ArgsOf<F>& a, const Vs&... xs) {
  if constexpr (arg_count<F> == 0) {
    return F::derivatives(xs...);
  } else {
    return F::derivatives(a, xs...);
  }
}
template <typename F, typename... Vs>
C10_HOST_DEVICE auto second_derivatives_of(const ArgsOf<F>& a, const Vs&... xs) {
  if constexpr (arg_count<F> == 0) {
    return F::second_derivatives(xs...);
  } else {
    return F::second_derivatives(a, xs...);
  }
}

// Where a choice's value `s` (of `n` characters) is among `options` ("none,tanh"): its index, else -1.
constexpr int choice_index(const char* options, const char* s, std::size_t n) {
  int index = 0;
  const char* p = options;
  while (true) {
    std::size_t k = 0;
    while (p[k] != '\0' && p[k] != ',') ++k;
    bool same = k == n;
    for (std::size_t i = 0; same && i < k; ++i) same = p[i] == s[i];
    if (same) return index;
    if (p[k] == '\0') return -1;
    p += k + 1;
    ++index;
  }
}

template <typename F>
constexpr std::size_t checked_arity() {
  static_assert(std::is_base_of_v<Formula, F>,
                "a pointwise op's struct derives from customops::pw::Formula (cmake/CustomopsPointwise.cmake)");
  return std::extent_v<decltype(F::kInputs)>;
}

template <typename F>
constexpr std::size_t arity = checked_arity<F>();

// The map of the forward op and of the backward op: f(x...), and grad_out * df/dxi for each i; each holds the
// call's argument values (by value into a CUDA kernel).
template <typename F>
struct ForwardMap {
  ArgsOf<F> args;
  template <typename V, typename... Vs>
  C10_HOST_DEVICE Values<V, 1> operator()(const V& x, const Vs&... xs) const {
    return {forward_of<F>(args, x, xs...)};
  }
};

template <typename F>
struct BackwardMap {
  ArgsOf<F> args;
  template <typename V, typename... Vs>
  C10_HOST_DEVICE auto operator()(const V& grad, const Vs&... xs) const {
    auto d = derivatives_of<F>(args, xs...);
    for (std::size_t i = 0; i < sizeof...(Vs); ++i) d[i] = grad * d[i];
    return d;
  }
};

} // namespace pw
} // namespace customops
