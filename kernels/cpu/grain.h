// Task sizes for at::parallel_for, compiled into each CPU capability build.
#pragma once

#include <algorithm>
#include <cstdint>

namespace customops::cpu::CPU_CAPABILITY {

// Items per task for tasks of at least ~32K elements of work each, as ATen's
// elementwise ops use.
inline int64_t grain(int64_t elements_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, elements_per_item));
}

} // namespace customops::cpu::CPU_CAPABILITY
