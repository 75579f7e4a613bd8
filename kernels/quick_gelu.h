// quick_gelu: y = x * sigmoid(1.702 x), the sigmoid approximation of GELU (CLIP's QuickGELU).
#pragma once

#include "kernels/core/pointwise.h"

namespace customops {

struct QuickGelu : pw::Formula {
  static constexpr const char* kName = "quick_gelu";
  static constexpr const char* kInputs[] = {"x"};

  static constexpr double kAlpha = 1.702;  // rounded to each dtype where used

  template <typename T>
  C10_HOST_DEVICE static T forward(T x) {
    // x / (1 + exp(-a x)) rather than x * sigmoid(a x): for very negative x the
    // exponential overflows to inf and the quotient is -0, never inf * 0 = NaN.
    return x / (T(1) + pw::exp(-T(kAlpha) * x));
  }

  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, 1> derivatives(T x) {
    // d/dx [x s(a x)] = s + a x s (1 - s), with s = sigmoid(a x). When s underflows
    // to 0 (x very negative) the second term is x * 0 = 0, not NaN.
    const T s = pw::sigmoid(T(kAlpha) * x);
    return {s + T(kAlpha) * x * s * (T(1) - s)};
  }

  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, 1> second_derivatives(T x) {
    // f''(x) = a s (1 - s) (2 + a x (1 - 2 s)).
    const T s = pw::sigmoid(T(kAlpha) * x);
    return {T(kAlpha) * s * (T(1) - s) * (T(2) + T(kAlpha) * x * (T(1) - T(2) * s))};
  }
};

} // namespace customops
