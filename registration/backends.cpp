// Kernels of the customops_backends ops (schemas.cpp): the per-op choice between customops' CUDA kernels
// and PyTorch's. They take no tensors, so one kernel serves every dispatch key.
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "kernels/common/backend_choice.h"
#include "kernels/conv2d.h"

namespace customops {
namespace {

std::vector<std::string> ops() {
  return backend::ops_with_choice();
}

void set(std::string op, std::string policy) {
  backend::set_policy(op, policy);
}

std::string get(std::string op) {
  return backend::policy_name(op);
}

std::vector<std::string> timed() {
  return backend::tuned().entries();
}

void clear_timed() {
  backend::tuned().clear();
}

// The rule's pick per pass for a call of these sizes, checked as the op checks them (on meta tensors).
std::vector<std::string> depthwise_conv2d_rule(at::IntArrayRef input_size, at::IntArrayRef weight_size,
                                               at::ScalarType dtype, bool channels_last, bool bias,
                                               at::IntArrayRef stride, at::IntArrayRef padding,
                                               at::IntArrayRef dilation) {
  const auto options = at::TensorOptions().device(at::kMeta).dtype(dtype);
  const auto format = channels_last && input_size.size() == 4 ? at::MemoryFormat::ChannelsLast
                                                              : at::MemoryFormat::Contiguous;
  const auto x = at::empty(input_size, options.memory_format(format));
  const auto w = at::empty(weight_size, options);
  const std::optional<at::Tensor> b = bias && !weight_size.empty() ? std::optional(at::empty({weight_size[0]}, options))
                                                                   : std::nullopt;
  const auto p = conv::depthwise_plan(x, w, b, stride, padding, dilation, /*allocate=*/false);
  std::vector<std::string> picks;
  for (auto pass : {conv::DepthwisePass::forward, conv::DepthwisePass::input_grad, conv::DepthwisePass::weight_grad}) {
    const auto c = conv::depthwise_case(pass, p, pass == conv::DepthwisePass::weight_grad && bias);
    picks.emplace_back(backend::name(conv::depthwise_rule(c)));
  }
  return picks;
}

}  // namespace

TORCH_LIBRARY_IMPL(customops_backends, CompositeImplicitAutograd, m) {
  m.impl("ops", &ops);
  m.impl("set", &set);
  m.impl("get", &get);
  m.impl("timed", &timed);
  m.impl("clear_timed", &clear_timed);
  m.impl("depthwise_conv2d_rule", &depthwise_conv2d_rule);
}

}  // namespace customops
