// Launch helpers shared by the CUDA kernels: grid sizes, 32-bit indexing where it fits, packed stores, and for
// the kernels that keep one wave of blocks resident (the direct convolutions) occupancy and shared-memory opt-in.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <set>
#include <utility>

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

// Lets `kernel` take the device's whole opt-in shared memory (past the default 48 KB): once per kernel and
// device. Each kernel (each template instantiation) needs its own: a flag shared between two made the second's
// launches fail.
template <typename Kernel>
void opt_in_shared_memory(Kernel kernel) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;
  const int device = c10::cuda::current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  if (done.insert({reinterpret_cast<const void*>(kernel), device}).second) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        at::cuda::getDeviceProperties(device)->sharedMemPerBlockOptin));
  }
}

// Resident blocks of `kernel` with `smem` bytes on the current device (all its SMs, at least one), asked again
// only when the kernel, size or device changes from this thread's last call.
template <typename Kernel>
int64_t resident_blocks(Kernel kernel, int threads, int64_t smem) {
  struct Query {
    const void* kernel;
    int threads, device;
    int64_t smem, blocks;
  };
  thread_local Query last{nullptr, 0, -1, 0, 0};
  const int device = c10::cuda::current_device();
  const Query now{reinterpret_cast<const void*>(kernel), threads, device, smem, 0};
  if (last.kernel != now.kernel || last.threads != threads || last.device != device || last.smem != smem) {
    int blocks = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
    last = now;
    last.blocks = std::max(blocks, 1);
  }
  return last.blocks * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

} // namespace customops::cuda::launch
