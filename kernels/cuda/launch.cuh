// Launch helpers shared by the gather-style CUDA kernels (fold, upsample,
// trilinear): grid sizes, 32-bit indexing where it fits, and packed stores.
#pragma once

#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace customops::cuda::launch {

constexpr int kThreads = 256;

// Blocks for one thread per item (grid-stride loops cover the rest).
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 30));
}

// Consecutive rows per thread for kernels that walk runs of rows: up to
// `most`, halved while the grid would hold less than two waves of threads at
// `threads_per_sm` resident threads per multiprocessor.
inline int64_t rows_per_thread(int64_t threads_per_row, int64_t rows, int64_t most, int64_t threads_per_sm) {
  const int64_t wanted = int64_t(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * threads_per_sm * 2;
  int64_t r = most;
  while (r > 1 && threads_per_row * ((rows + r - 1) / r) < wanted) r /= 2;
  return r;
}

// Calls fn(int32_t{}) when every offset fits in 32 bits, else fn(int64_t{}):
// these kernels do a few divisions per element, which cost several times more
// in 64 bits. Half the range, so that a grid-stride step past the end cannot
// overflow.
template <typename Fn>
void with_index_type(int64_t max_offset, Fn&& fn) {
  if (max_offset <= std::numeric_limits<int32_t>::max() / 2) {
    fn(int32_t{});
  } else {
    fn(int64_t{});
  }
}

// VEC consecutive elements, loaded or stored as one aligned access.
template <typename scalar_t, int VEC>
struct alignas(sizeof(scalar_t) * VEC) Pack {
  scalar_t v[VEC];
};

// Elements in a 16-byte access (1 for wider types).
template <typename scalar_t>
constexpr int widest() {
  return sizeof(scalar_t) >= 16 ? 1 : static_cast<int>(16 / sizeof(scalar_t));
}

inline bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

} // namespace customops::cuda::launch
