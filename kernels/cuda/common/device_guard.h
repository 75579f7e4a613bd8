// The CUDAGuard every CUDA kernel entry takes, which also refuses, once per device and with a message naming
// the fix, a GPU this build has no kernels for (instead of CUDA's "no kernel image is available").
#pragma once

#include <c10/core/Device.h>
#include <c10/cuda/CUDAGuard.h>

namespace customops::cuda {

void check_device_supported(c10::DeviceIndex index);

struct KernelGuard : c10::cuda::CUDAGuard {
  explicit KernelGuard(c10::Device device) : c10::cuda::CUDAGuard(device) {
    check_device_supported(device.index());
  }
};

}  // namespace customops::cuda
