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

// The formulas' functions on SIMD vectors (exp_u20: ATen's vectorised exp, within 20 ulp, header-only; tanh is
// Sleef's in the AVX2 build, which only libtorch links).
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
