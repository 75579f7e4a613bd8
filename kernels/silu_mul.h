// silu_mul: y = silu(a) * b = a * sigmoid(a) * b, the gated activation of SwiGLU MLPs.
#pragma once

#include "kernels/core/pointwise.h"

namespace customops {

struct SiluMul : pw::Formula {
  static constexpr const char* kName = "silu_mul";
  static constexpr const char* kInputs[] = {"a", "b"};

  // a / (1 + exp(-a)): finite for every finite a (the exponential overflows to inf, the quotient to -0).
  template <typename T>
  C10_HOST_DEVICE static T forward(T a, T b) {
    return a / (T(1) + pw::exp(-a)) * b;
  }

  // With s = sigmoid(a): d/da = b s (1 + a (1 - s)), d/db = a s.
  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, 2> derivatives(T a, T b) {
    const T s = pw::sigmoid(a);
    return {b * (s * (T(1) + a * (T(1) - s))), a * s};
  }

  // d2/da2 = b s (1 - s) (2 + a (1 - 2 s)), d2/da db = s (1 + a (1 - s)), d2/db2 = 0.
  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, 4> second_derivatives(T a, T b) {
    const T s = pw::sigmoid(a);
    const T dsilu = s * (T(1) + a * (T(1) - s));
    return {b * (s * (T(1) - s) * (T(2) + a * (T(1) - T(2) * s))), dsilu, dsilu, T(0)};
  }
};

} // namespace customops
