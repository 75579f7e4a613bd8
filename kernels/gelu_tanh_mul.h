// gelu_tanh_mul: y = gelu_tanh(a) * b, GeGLU's gate with GELU's tanh approximation (Gemma's gelu_pytorch_tanh).
#pragma once

#include "kernels/core/pointwise.h"

namespace customops {

// The formulas, written once (kernels/core/pointwise.h): with arithmetic, T(constant), pw::exp, pw::sigmoid and
// pw::tanh, on numbers (CUDA, the CPU tails), SIMD vectors (the CPU body) and tensors (the double backward), in
// the kernels' opmath type. The tests compare them with the Python copy, python/customops/pointwise/gelu_tanh_mul.py.
struct GeluTanhMul : pw::Formula {
  static constexpr const char* kName = "gelu_tanh_mul";
  static constexpr const char* kInputs[] = {"a", "b"};

  // gelu_tanh(a) = a / 2 (1 + tanh(u)) = a s, with u = k (a + c a^3) and s = sigmoid(2 u): F.gelu(a,
  // approximate="tanh"). Written with s and sbar = sigmoid(-2 u) = 1 - s, each computed directly: 1 + tanh(u) and
  // 1 - tanh(u)^2 would cancel to a few ulp of 1 where |u| is large, and the derivatives multiply them by a^3.
  static constexpr double kK = 0.7978845608028654;  // sqrt(2 / pi)
  static constexpr double kC = 0.044715;

  template <typename T>
  C10_HOST_DEVICE static T forward(T a, T b) {
    const T u = T(kK) * (a + T(kC) * a * a * a);
    return a * pw::sigmoid(T(2) * u) * b;
  }

  // g'(a) = s + 2 a s sbar u', u' = k (1 + 3 c a^2); df/da = b g'(a), df/db = g(a).
  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, 2> derivatives(T a, T b) {
    const T u = T(kK) * (a + T(kC) * a * a * a);
    const T s = pw::sigmoid(T(2) * u), sbar = pw::sigmoid(T(-2) * u);
    const T du = T(kK) * (T(1) + T(3 * kC) * a * a);
    return {b * (s + T(2) * a * s * sbar * du), a * s};
  }

  // g''(a) = 2 s sbar (2 u' + a (2 (sbar - s) u'^2 + u'')), u'' = 6 k c a; d2f/da2 = b g'', d2f/da db = g',
  // d2f/db2 = 0.
  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, 4> second_derivatives(T a, T b) {
    const T u = T(kK) * (a + T(kC) * a * a * a);
    const T s = pw::sigmoid(T(2) * u), sbar = pw::sigmoid(T(-2) * u);
    const T du = T(kK) * (T(1) + T(3 * kC) * a * a);
    const T dgelu = s + T(2) * a * s * sbar * du;
    const T d2gelu = T(2) * s * sbar * (T(2) * du + a * (T(2) * (sbar - s) * du * du + T(6 * kK * kC) * a));
    return {b * d2gelu, dgelu, dgelu, T(0)};
  }
};

} // namespace customops
