// Pointwise operators: an op y = f(x1, ..., xN) over tensors of one shape, and its
// backward op (grad_out, x1, ..., xN) -> (grad_out * df/dx1, ..., grad_out * df/dxN).
//
// A family is a struct (kernels/<family>.h) deriving from pw::Formula, with
//   static constexpr const char* kName;                  the op's name
//   static constexpr const char* kInputs[N];             its tensor arguments' names
//   static constexpr Arg kArgs[K];                       its scalar arguments, if any (kernels/core/pointwise.h)
//   template <class T> static T forward(T x1, ..., T xN);
//   template <class T> static Values<T, N> derivatives(T x1, ..., T xN);          df/dxi
//   template <class T> static Values<T, N * N> second_derivatives(T x1, ..., T xN);  d2f/dxi dxj, row-major
// (with scalar arguments each formula takes their values first: forward(const Args<K>& a, T x1, ..., T xN))
// written once, with the arithmetic operators, T(constant) and the functions below
// (pw::exp, pw::sigmoid, pw::tanh). The same text is evaluated on scalars (the CUDA kernels and
// the CPU tails, in at::opmath_type), on at::vec::Vectorized (the CPU kernels' SIMD body,
// kernels/cpu/common/pointwise.h) and on ATen tensors (the double backward,
// registration/pointwise.h). Each backend's kernels are then one explicit instantiation,
// `template struct Pointwise<Family>;`, and the registration one line, which
// cmake/CustomopsPointwise.cmake writes for each family header (and ExecuTorch's kernel, from the formulas'
// part, kernels/core/pointwise.h, which has no ATen).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>
#include <c10/util/string_view.h>

#include <cmath>
#include <cstddef>
#include <array>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"
#include "kernels/core/pointwise.h"

namespace customops {
namespace pw {

// A tensor per index of a pack (through a class template: nvcc's front end drops an alias template's unused
// parameter, and a pack expanded over it then expands nothing).
template <std::size_t>
struct TensorFor {
  using type = at::Tensor;
};
template <std::size_t I>
using TensorArg = const typename TensorFor<I>::type&;
template <std::size_t I>
using TensorResult = typename TensorFor<I>::type;

// The C++ type of scalar argument K of F in its kernels' signatures, as the schema's type maps to it: float ->
// double, int -> int64_t, bool -> bool, a choice's str -> c10::string_view.
template <ArgType>
struct ArgCpp;
template <>
struct ArgCpp<ArgType::Float> {
  using type = double;
};
template <>
struct ArgCpp<ArgType::Int> {
  using type = int64_t;
};
template <>
struct ArgCpp<ArgType::Bool> {
  using type = bool;
};
template <>
struct ArgCpp<ArgType::Choice> {
  using type = c10::string_view;
};
template <typename F, std::size_t K>
using ArgArg = typename ArgCpp<F::kArgs[K].type>::type;

// One argument's value as the formulas take it (pw::Arg), checked against its range or options; `op` names the
// op in the message.
inline void check_arg(const char* op, const Arg& arg, double value) {
  if (arg.accepts(value)) return;
  std::string range;
  if (arg.low > -std::numeric_limits<double>::infinity()) {
    range += std::string(arg.name) + (arg.low_open ? " > " : " >= ") + c10::str(arg.low);
  }
  if (arg.high < std::numeric_limits<double>::infinity()) {
    range += (range.empty() ? "" : " and ") + std::string(arg.name) + (arg.high_open ? " < " : " <= ") +
             c10::str(arg.high);
  }
  TORCH_CHECK(false, "customops::", op, ": expected ", range, ", got ", arg.name, "=", value);
}
inline double arg_value(const char* op, const Arg& arg, double v) {
  check_arg(op, arg, v);
  return v;
}
inline double arg_value(const char* op, const Arg& arg, int64_t v) {
  check_arg(op, arg, static_cast<double>(v));
  return static_cast<double>(v);
}
inline double arg_value(const char* /*op*/, const Arg& /*arg*/, bool v) {
  return v ? 1 : 0;
}
inline double arg_value(const char* op, const Arg& arg, c10::string_view v) {
  const int index = choice_index(arg.options, v.data(), v.size());
  TORCH_CHECK(index >= 0, "customops::", op, ": expected ", arg.name, " to be one of ", arg.options, ", got '",
              std::string(v.data(), v.size()), "'");
  return index;
}

// F's arguments' values for its formulas, every one checked.
template <typename F, typename... As>
ArgsOf<F> arg_values(const char* op, const As&... as) {
  static_assert(sizeof...(As) == arg_count<F>, "one value per argument of kArgs");
  if constexpr (sizeof...(As) == 0) {
    return {};
  } else {
    std::size_t k = 0;
    return ArgsOf<F>{{arg_value(op, F::kArgs[k++], as)...}};
  }
}

// What a backward op returns: one tensor, or one per input.
template <typename F, typename = std::make_index_sequence<arity<F>>>
struct GradsOf;
template <typename F, std::size_t... I>
struct GradsOf<F, std::index_sequence<I...>> {
  using type = std::conditional_t<sizeof...(I) == 1, at::Tensor, std::tuple<TensorResult<I>...>>;
};
template <typename F>
using Grads = typename GradsOf<F>::type;

inline std::string backward_name(const char* name) {
  return std::string(name) + "_backward";
}

// Every input a floating tensor of the first one's device, dtype and shape, that fits in dense memory.
template <std::size_t N>
void check_inputs(const char* op, const char* const (&names)[N], const at::Tensor* const (&xs)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    checks::floating(op, names[i], *xs[i]);
  }
  for (std::size_t i = 1; i < N; ++i) {
    checks::same_device(op, names[i], *xs[i], names[0], *xs[0]);
    checks::same_dtype(op, names[i], *xs[i], names[0], *xs[0]);
    checks::same_shape(op, names[i], *xs[i], names[0], *xs[0]);
  }
  for (std::size_t i = 0; i < N; ++i) {
    checks::dense_fits(op, names[i], *xs[i]);
  }
}

template <typename F, typename... Xs>
void check_forward(const Xs&... xs) {
  check_inputs<sizeof...(Xs)>(F::kName, F::kInputs, {&xs...});
}

template <typename F, typename... Xs>
void check_backward(const at::Tensor& grad_out, const Xs&... xs) {
  const std::string op = backward_name(F::kName);
  check_inputs<sizeof...(Xs)>(op.c_str(), F::kInputs, {&xs...});
  const at::Tensor& first = std::get<0>(std::tie(xs...));
  checks::floating(op.c_str(), "grad_out", grad_out);
  checks::same_device(op.c_str(), "grad_out", grad_out, F::kInputs[0], first);
  checks::same_dtype(op.c_str(), "grad_out", grad_out, F::kInputs[0], first);
  checks::same_shape(op.c_str(), "grad_out", grad_out, F::kInputs[0], first);
  checks::dense_fits(op.c_str(), "grad_out", grad_out);
}

// The backward op's result from its N tensors.
template <std::size_t N>
auto as_grads(std::array<at::Tensor, N> grads) {
  if constexpr (N == 1) {
    return grads[0];
  } else {
    return std::apply([](auto&... g) { return std::make_tuple(g...); }, grads);
  }
}

} // namespace pw

// The kernels of a family, per backend: one class template per namespace, whose
// members each backend's header defines (kernels/cpu|cuda|meta/.../pointwise.h) and
// each family's kernel file instantiates.
#define CUSTOMOPS_POINTWISE_KERNELS                                                                 \
  template <typename F, typename = std::make_index_sequence<pw::arity<F>>,                          \
            typename = std::make_index_sequence<pw::arg_count<F>>>                                  \
  struct Pointwise;                                                                                 \
  template <typename F, std::size_t... I, std::size_t... K>                                         \
  struct Pointwise<F, std::index_sequence<I...>, std::index_sequence<K...>> {                       \
    static at::Tensor forward(pw::TensorArg<I>... xs, pw::ArgArg<F, K>... args);                    \
    static pw::Grads<F> backward(const at::Tensor& grad_out, pw::TensorArg<I>... xs,                \
                                 pw::ArgArg<F, K>... args);                                         \
  };

namespace cpu {
CUSTOMOPS_CPU_DECLARE(CUSTOMOPS_POINTWISE_KERNELS)
} // namespace cpu
namespace cuda {
CUSTOMOPS_POINTWISE_KERNELS
} // namespace cuda
namespace meta {
CUSTOMOPS_POINTWISE_KERNELS
} // namespace meta

#undef CUSTOMOPS_POINTWISE_KERNELS

} // namespace customops
