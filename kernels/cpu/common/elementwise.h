// Vectorised, multi-threaded elementwise map over dense memory (kernels/core/pointwise_simd.h) on ATen's thread
// pool, compiled into each CPU capability build.
#pragma once

#include <array>
#include <cstddef>

#include "kernels/common/pointwise.h"
#include "kernels/core/pointwise_simd.h"
#include "kernels/cpu/common/parallel.h"

namespace customops::cpu::CPU_CAPABILITY {

// out[k][i] = op(in[i]...)[k] for i in [0, n): pw::map_dense.
template <typename scalar_t, std::size_t K, typename Op, typename... In>
void map_dense(const std::array<scalar_t*, K>& out, int64_t n, const Op& op, const In*... in) {
  pw::map_dense(kParallelFor, out, n, op, in...);
}

} // namespace customops::cpu::CPU_CAPABILITY
