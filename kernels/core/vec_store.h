// Stores of opmath vectors (float for the half types) into tensors of the kernel's dtype, compiled into each
// CPU capability build of libtorch's kernels and of ExecuTorch's (header-only at::vec).
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16-math.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace customops::cpu::CPU_CAPABILITY {

// The first n (<= V) lanes of v to dst, as out_t.
//
// Half types convert the vector in registers: at::vec::convert() vectorises
// only whole half-type vectors (2V lanes) and converts a shorter run one scalar
// at a time, which in a 3x3 depthwise forward took longer than the sums
// themselves.
template <typename opmath_t, typename out_t>
C10_ALWAYS_INLINE void store_lanes(const at::vec::Vectorized<opmath_t>& v, out_t* dst, int64_t n) {
  constexpr int64_t V = at::vec::Vectorized<opmath_t>::size();
  if constexpr (std::is_same_v<out_t, opmath_t>) {
    if (n >= V) {
      v.store(dst);
    } else if (n > 0) {
      v.store(dst, n);
    }
  } else if constexpr (c10::is_reduced_floating_point_v<out_t>) {
    const auto h = at::vec::convert_from_float<out_t>(v, v);  // lanes [0, V), and again [V, 2V)
    if (n >= V) {
      h.store(dst, V);
    } else if (n > 0) {
      h.store(dst, n);
    }
  } else {
    opmath_t lanes[V];
    v.store(lanes);
    at::vec::convert(lanes, dst, std::min(n, V));
  }
}

} // namespace customops::cpu::CPU_CAPABILITY
