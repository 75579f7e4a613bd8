#include "kernels/common/cuda_arch.h"

#include <algorithm>
#include <sstream>

namespace customops::cuda_arch {

namespace {

std::string version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string capability_text(int c) {
  return std::to_string(c / 10) + "." + std::to_string(c % 10);
}

}  // namespace

std::string describe(const std::vector<int>& archs, const char* prefix) {
  std::string out;
  for (int a : archs) out += (out.empty() ? "" : ", ") + std::string(prefix) + std::to_string(a);
  return out.empty() ? "none" : out;
}

std::vector<int> parse(const char* list) {
  std::vector<int> out;
  std::stringstream in(list == nullptr ? "" : list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::stoi(item));
  }
  return out;
}

std::string problem(const Build& build, const Device& device) {
  const std::string gpu = device.name + " (sm_" + std::to_string(device.capability) + ")";
  const std::string rebuild = "rebuild customops for it: TORCH_CUDA_ARCH_LIST=" + capability_text(device.capability) +
                              " pip install --no-build-isolation . (customops.build_info() lists what it holds)";
  if (device.driver_version / 1000 < build.cuda_version / 1000) {
    return "customops: the NVIDIA driver supports CUDA " + version_text(device.driver_version) +
           ", older than the CUDA " + version_text(build.cuda_version) + " customops and torch were built with; " +
           "install a driver for CUDA " + std::to_string(build.cuda_version / 1000) + ".x or newer";
  }
  // Machine code runs on GPUs of its major architecture with an equal or higher minor one.
  const bool sass = std::any_of(build.sass.begin(), build.sass.end(), [&](int a) {
    return a / 10 == device.capability / 10 && a % 10 <= device.capability % 10;
  });
  if (sass) return "";
  const bool ptx = std::any_of(build.ptx.begin(), build.ptx.end(), [&](int a) { return a <= device.capability; });
  if (!ptx) {
    return "customops has no kernels for " + gpu + ": it was built for " + describe(build.sass, "sm_") +
           " (PTX: " + describe(build.ptx, "compute_") + "); " + rebuild;
  }
  if (device.driver_version < build.cuda_version) {
    return "customops runs on " + gpu + " through PTX, which this driver (CUDA " +
           version_text(device.driver_version) + ") cannot compile: it comes from CUDA " +
           version_text(build.cuda_version) + "; update the driver, or " + rebuild;
  }
  return "";
}

}  // namespace customops::cuda_arch
