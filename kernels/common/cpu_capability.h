// The CPU kernels are compiled once per instruction set (see
// cmake/CustomopsCpuCapabilities.cmake), each build in namespace
// customops::cpu::<CPU_CAPABILITY>. These helpers declare both builds and
// pick one when the operators are registered.
#pragma once

#include <ATen/Version.h>

#include <string>

// Declares the given kernels in every capability namespace.
#define CUSTOMOPS_CPU_DECLARE(...) \
  namespace DEFAULT {              \
  __VA_ARGS__                      \
  }                                \
  namespace AVX2 {                 \
  __VA_ARGS__                      \
  }

namespace customops::cpu {

// Prefers AVX2 when ATen would use it (ATen honours the ATEN_CPU_CAPABILITY
// environment variable, so does this).
template <typename Fn>
Fn select_kernel(Fn default_kernel, Fn avx2_kernel) {
  // "DEFAULT", "AVX2" or "AVX512" on x86-64.
  const std::string capability = at::get_cpu_capability();
  return capability == "AVX2" || capability == "AVX512" ? avx2_kernel : default_kernel;
}

} // namespace customops::cpu

// The kernel `name` of the best CPU build for this machine. Where no AVX2
// build exists (other processors) its symbols are never named: taking their
// addresses would leave undefined symbols in the library.
#if defined(CUSTOMOPS_CPU_HAVE_AVX2)
#define CUSTOMOPS_CPU_KERNEL(name) \
  ::customops::cpu::select_kernel(&::customops::cpu::DEFAULT::name, &::customops::cpu::AVX2::name)
#else
#define CUSTOMOPS_CPU_KERNEL(name) (&::customops::cpu::DEFAULT::name)
#endif
