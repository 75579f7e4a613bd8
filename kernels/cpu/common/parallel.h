// at::parallel_for for the CPU kernels, and their task sizes.
#pragma once

#include <ATen/Config.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

// With an OpenMP build of ATen, at::parallel_for is a header template whose
// `#pragma omp parallel` only takes effect in files compiled with OpenMP;
// without it every kernel silently runs on one thread. CMake adds the flag
// (cmake/CustomopsCpuCapabilities.cmake); this keeps it from going missing.
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "customops CPU kernels must be compiled with OpenMP (-fopenmp) when ATen uses OpenMP"
#endif

namespace customops::cpu::CPU_CAPABILITY {

// ATen's thread pool as the parallel loop the kernels of kernels/core/ take: (begin, end, grain, fn(begin, end)).
inline constexpr auto kParallelFor = [](int64_t begin, int64_t end, int64_t grain, const auto& fn) {
  at::parallel_for(begin, end, grain, fn);
};

// Items per task for tasks of at least ~32K elements of work each, as ATen's
// elementwise ops use.
inline int64_t grain(int64_t elements_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, elements_per_item));
}

} // namespace customops::cpu::CPU_CAPABILITY
