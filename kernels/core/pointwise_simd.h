// The pointwise formulas (kernels/core/pointwise.h) on at::vec's SIMD vectors, and the vectorised map over dense
// memory that evaluates them: header-only, compiled into each instruction-set build of libtorch's CPU kernels
// (kernels/cpu/common/) and of ExecuTorch's (kernels/executorch/isa/).
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "kernels/core/pointwise.h"

namespace customops::pw {

// The formulas' functions on SIMD vectors (exp_u20: ATen's vectorised exp, within 20 ulp, header-only). at::vec's
// tanh is Sleef's in the AVX2 build, which only libtorch links: a runtime without it (ExecuTorch's kernels,
// kernels/executorch/isa/pointwise.h) defines CUSTOMOPS_POINTWISE_NO_SLEEF and gets one made of exp_u20.
template <typename T>
struct Maths<at::vec::Vectorized<T>> {
  using V = at::vec::Vectorized<T>;
  static V exp(const V& x) {
    return x.exp_u20();
  }
  static V tanh(const V& x) {
#if defined(CUSTOMOPS_POINTWISE_NO_SLEEF)
    // |x| >= 0.4: 1 - 2 / (exp(2|x|) + 1), at least 0.38, so the subtraction loses at most a bit (exp overflows to
    // inf for large |x|, and the quotient to 0). |x| < 0.4: tanh's odd series to x^15, whose next term is below
    // 1e-9 of the value there.
    const V one(T(1)), two(T(2));
    const V a = x.abs();
    const V large = one - two / ((two * a).exp_u20() + one);
    const V z = x * x;
    V p(T(-929569.0 / 638512875.0));
    for (const double c : {21844.0 / 6081075.0, -1382.0 / 155925.0, 62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0,
                           -1.0 / 3.0}) {
      p = p * z + V(T(c));
    }
    const V small = x + x * z * p;
    return V::blendv(V::blendv(large, large.neg(), x < V(T(0))), small, a < V(T(0.4)));
#else
    return x.tanh();
#endif
  }
  static V sigmoid(const V& x) {
    const V one(T(1));
    return one / (one + x.neg().exp_u20());
  }
};

// The type the formulas are evaluated in: float for the half types, as at::opmath_type.
template <typename T>
using opmath = std::conditional_t<std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>, float, T>;

// Internal linkage: each runtime compiles this once per instruction set, and one shared symbol would let the
// linker keep any one of those copies for every caller.
namespace {

// out[k][i] = op(in[i]...)[k] for i in [0, n) and each of the K outputs. `op` takes opmath<scalar_t> scalars (for
// the tail) and Vectorized<opmath<scalar_t>> (for the body) and returns pw::Values of K of them; float16 and
// bfloat16 are widened to float for the arithmetic. parallel_for(begin, end, grain, fn(begin, end)) is the
// runtime's.
template <typename scalar_t, std::size_t K, typename ParallelFor, typename Op, typename... In>
void map_dense(const ParallelFor& parallel_for, const std::array<scalar_t*, K>& out, int64_t n, const Op& op,
               const In*... in) {
  using opmath_t = opmath<scalar_t>;
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t kVec = Vec::size();
  constexpr int64_t kGrain = 32768;  // elements per task, as ATen's own elementwise ops
  parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + kVec <= end; i += kVec) {
      if constexpr (std::is_same_v<scalar_t, opmath_t>) {
        const auto r = op(Vec::loadu(in + i)...);
        for (std::size_t k = 0; k < K; ++k) r[k].store(out[k] + i);
      } else {
        const auto halves = std::make_tuple(at::vec::convert_to_float<scalar_t>(Vec::loadu(in + i))...);
        const auto lo = std::apply([&](const auto&... h) { return op(std::get<0>(h)...); }, halves);
        const auto hi = std::apply([&](const auto&... h) { return op(std::get<1>(h)...); }, halves);
        for (std::size_t k = 0; k < K; ++k) at::vec::convert_from_float<scalar_t>(lo[k], hi[k]).store(out[k] + i);
      }
    }
    for (; i < end; ++i) {
      const auto r = op(static_cast<opmath_t>(in[i])...);
      for (std::size_t k = 0; k < K; ++k) out[k][i] = static_cast<scalar_t>(r[k]);
    }
  });
}

}  // namespace
}  // namespace customops::pw
