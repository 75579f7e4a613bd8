#include "kernels/cuda/common/device_guard.h"

#include "kernels/common/cuda_arch.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>

namespace customops::cuda {

namespace {

constexpr int kMaxDevices = 64;

std::string find_problem(c10::DeviceIndex index) {
  const cudaDeviceProp* props = at::cuda::getDeviceProperties(index);
  int driver = 0;
  C10_CUDA_CHECK(cudaDriverGetVersion(&driver));
  const cuda_arch::Build build{cuda_arch::parse(CUSTOMOPS_CUDA_SASS), cuda_arch::parse(CUSTOMOPS_CUDA_PTX),
                               CUDART_VERSION};
  return cuda_arch::problem(build, {props->major * 10 + props->minor, driver, props->name});
}

}  // namespace

void check_device_supported(c10::DeviceIndex index) {
  // 0: not checked yet, 1: supported, 2: not. The first call per device asks it; later ones read one flag.
  static std::array<std::atomic<int>, kMaxDevices> state{};
  static std::array<std::string, kMaxDevices> problems;
  static std::mutex mutex;
  if (index < 0 || index >= kMaxDevices) return;
  int known = state[index].load(std::memory_order_acquire);
  if (known == 0) {
    const std::lock_guard<std::mutex> lock(mutex);
    known = state[index].load(std::memory_order_relaxed);
    if (known == 0) {
      problems[index] = find_problem(index);
      known = problems[index].empty() ? 1 : 2;
      state[index].store(known, std::memory_order_release);
    }
  }
  TORCH_CHECK(known == 1, problems[index]);
}

}  // namespace customops::cuda
