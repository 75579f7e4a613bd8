// Whether a GPU can run the CUDA kernels of this build, decided from what the build holds (SASS per
// architecture, PTX) and what the device and driver are. Plain C++: the CUDA side (kernels/cuda/common/
// device_guard.cpp) asks the device, the C++ tests feed it made-up devices.
#pragma once

#include <string>
#include <vector>

namespace customops::cuda_arch {

struct Build {
  std::vector<int> sass;  // e.g. {80, 86, 90}: machine code for these compute capabilities
  std::vector<int> ptx;   // e.g. {120}: PTX the driver compiles for newer GPUs
  int cuda_version = 0;   // CUDART_VERSION of the compiler, e.g. 13020
};

struct Device {
  int capability = 0;      // major * 10 + minor, e.g. 90
  int driver_version = 0;  // cudaDriverGetVersion, e.g. 13000
  std::string name;
};

// "" when the device runs the build's kernels; otherwise one line saying why not and how to fix it.
std::string problem(const Build& build, const Device& device);

// "sm_80, sm_86" / "compute_120"
std::string describe(const std::vector<int>& archs, const char* prefix);

// "80,86,90" (a compile definition) -> {80, 86, 90}
std::vector<int> parse(const char* list);

}  // namespace customops::cuda_arch
