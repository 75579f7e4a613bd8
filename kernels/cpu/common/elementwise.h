// Vectorised, multi-threaded elementwise map over dense memory, compiled into
// each CPU capability build.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "kernels/common/pointwise.h"
#include "kernels/cpu/common/parallel.h"

namespace customops::cpu::CPU_CAPABILITY {

// out[k][i] = op(in[i]...)[k] for i in [0, n) and each of the K outputs. `op`
// takes opmath_type<scalar_t> scalars (for the tail) and
// Vectorized<opmath_type<scalar_t>> (for the body) and returns pw::Values of K
// of them; float16 and bfloat16 are widened to float for the arithmetic.
template <typename scalar_t, std::size_t K, typename Op, typename... In>
void map_dense(const std::array<scalar_t*, K>& out, int64_t n, const Op& op, const In*... in) {
  using opmath_t = at::opmath_type<scalar_t>;
  using Vec = at::vec::Vectorized<scalar_t>;
  constexpr int64_t kVec = Vec::size();
  constexpr int64_t kGrain = 32768;  // elements per task, as ATen's own elementwise ops
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
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

} // namespace customops::cpu::CPU_CAPABILITY
