#pragma once

#include <string>

namespace customops::backends {

// Which implementation an op runs on CUDA where PyTorch has a competing kernel (Python: customops.backends):
// "auto" (the default: the faster for the call's shape, by a measured rule, or timed once per shape while
// cuDNN's benchmark mode is on), "customops" or "pytorch". For the whole process. Ops with a choice:
// "depthwise_conv2d". Throws c10::Error for another op or backend.
void set(const std::string& op, const std::string& backend);
std::string get(const std::string& op);

}  // namespace customops::backends
