// What torch.autocast does to the customops operators. Each family's
// registration file registers every one of its ops under both autocast keys
// (AutocastCPU, AutocastCUDA) with one of the two policies below, next to its
// CPU/CUDA/Meta/Autograd kernels, so an op's whole dispatch stays in one file
// (tests/python/test_registry.py fails for an op without them).
//
// The policies are those of PyTorch's counterparts (ATen's autocast lists):
// - lower precision: convolutions run in the autocast dtype, as aten::conv2d;
//   the casts are ordinary ops, recorded by autograd, so gradients reach
//   float32 parameters as float32.
// - input dtype: elementwise, resampling and gather ops run in their inputs'
//   dtype (no cast), as activations, F.interpolate and F.unfold do.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <initializer_list>

namespace customops::autocast {

// A scope in which the op is called again below the autocast key of `device`,
// with cast() giving each floating tensor argument the autocast dtype (float64
// is left alone, as ATen's cached_cast does).
template <c10::DeviceType device>
class LowerPrecision {
 public:
  template <typename T>
  decltype(auto) cast(const T& arg) const {
    return at::autocast::cached_cast(dtype_, arg, device);
  }

 private:
  c10::impl::ExcludeDispatchKeyGuard no_autocast_{at::autocast::get_autocast_dispatch_key_from_device_type(device)};
  at::ScalarType dtype_ = at::autocast::get_lower_precision_fp_from_device_type(device);
};

// The input-dtype policy: the autocast key passes the call through.
inline void keep_input_dtype(torch::Library& m, std::initializer_list<const char*> ops) {
  for (const char* op : ops) m.impl(op, torch::CppFunction::makeFallthrough());
}

} // namespace customops::autocast

// Registers the ops named (string literals) under both autocast keys with the
// input-dtype policy.
#define CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE(...)                                     \
  TORCH_LIBRARY_IMPL(customops, AutocastCPU, m) {                                    \
    customops::autocast::keep_input_dtype(m, {__VA_ARGS__});                         \
  }                                                                                  \
  TORCH_LIBRARY_IMPL(customops, AutocastCUDA, m) {                                   \
    customops::autocast::keep_input_dtype(m, {__VA_ARGS__});                         \
  }

// Registers under both autocast keys what register<device>(torch::Library&)
// registers for that device type.
#define CUSTOMOPS_AUTOCAST_IMPL(register)                                            \
  TORCH_LIBRARY_IMPL(customops, AutocastCPU, m) {                                    \
    register<c10::DeviceType::CPU>(m);                                               \
  }                                                                                  \
  TORCH_LIBRARY_IMPL(customops, AutocastCUDA, m) {                                   \
    register<c10::DeviceType::CUDA>(m);                                              \
  }
