// Which instruction-set build of kernels/executorch/isa/ this process runs.
#include "kernels/executorch/isa.h"

#include <cstdlib>
#include <cstring>

namespace customops::executorch_kernels {

bool runs_avx2() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool avx2 = [] {
    const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
    if (forced != nullptr && std::strcmp(forced, "default") == 0) return false;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return avx2;
#else
  return false;
#endif
}

} // namespace customops::executorch_kernels
