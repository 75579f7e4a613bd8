// Kernels of the customops_backends ops (schemas.cpp): the per-op choice between customops' CUDA kernels
// and PyTorch's. They take no tensors, so one kernel serves every dispatch key.
#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <functional>

#include <customops/conv.h>

#include "kernels/common/backend_choice.h"
#include "kernels/common/depthwise_route.h"
#include "kernels/conv2d.h"
#include "kernels/upsample.h"

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

// What the policy, the benchmark mode's record or the rule picks for one case, as the CUDA kernels decide
// (kernels/cuda/common/timed_choice.h) without running anything; "untimed" where benchmark mode would time it.
std::string decided(const char* op, bool has_choice, backend::Impl rule, const std::function<std::string()>& key) {
  const auto policy = backend::policy(op);
  const auto& ctx = at::globalContext();
  if (policy == backend::Policy::customops || !has_choice) return backend::name(backend::Impl::customops);
  if (policy == backend::Policy::pytorch) return backend::name(backend::Impl::pytorch);
  if (ctx.benchmarkCuDNN() && !ctx.deterministicAlgorithms()) {
    const auto known = backend::tuned().find(key());
    return known ? backend::name(*known) : "untimed";
  }
  return backend::name(rule);
}

// A depthwise call's plan from its sizes, checked as the op checks them (on meta tensors).
conv::DepthwisePlan meta_plan(at::IntArrayRef input_size, at::IntArrayRef weight_size, at::ScalarType dtype,
                              bool channels_last, bool bias, at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation) {
  const auto options = at::TensorOptions().device(at::kMeta).dtype(dtype);
  const auto format = channels_last && input_size.size() == 4 ? at::MemoryFormat::ChannelsLast
                                                              : at::MemoryFormat::Contiguous;
  const auto x = at::empty(input_size, options.memory_format(format));
  const auto w = at::empty(weight_size, options);
  const std::optional<at::Tensor> b = bias && !weight_size.empty() ? std::optional(at::empty({weight_size[0]}, options))
                                                                   : std::nullopt;
  return conv::depthwise_plan(x, w, b, stride, padding, dilation, /*allocate=*/false);
}

constexpr conv::DepthwisePass kPasses[] = {conv::DepthwisePass::forward, conv::DepthwisePass::input_grad,
                                           conv::DepthwisePass::weight_grad};

// As the CUDA kernels ask (kernels/cuda/depthwise_conv2d/choice.cpp): the bias goes with the forward and with
// the weight gradient, so that a timed choice is found under the key it was kept by.
conv::DepthwiseCase pass_case(conv::DepthwisePass pass, const conv::DepthwisePlan& p, bool bias) {
  return conv::depthwise_case(pass, p, pass != conv::DepthwisePass::input_grad && bias);
}

// The rule's pick per pass for a call of these sizes.
std::vector<std::string> depthwise_conv2d_rule(at::IntArrayRef input_size, at::IntArrayRef weight_size,
                                               at::ScalarType dtype, bool channels_last, bool bias,
                                               at::IntArrayRef stride, at::IntArrayRef padding,
                                               at::IntArrayRef dilation) {
  const auto p = meta_plan(input_size, weight_size, dtype, channels_last, bias, stride, padding, dilation);
  std::vector<std::string> picks;
  for (auto pass : kPasses) picks.emplace_back(backend::name(conv::depthwise_rule(pass_case(pass, p, bias))));
  return picks;
}

// What a CUDA call of these sizes on `device` runs per pass, decided as the CUDA kernels decide
// (kernels/cuda/common/timed_choice.h) without running anything: the forced policy, else in benchmark mode
// the choice timed for the shape ("untimed" where none is yet), else the rule. Compiled graphs ask it.
std::vector<std::string> depthwise_conv2d_choice(at::IntArrayRef input_size, at::IntArrayRef weight_size,
                                                 at::ScalarType dtype, bool channels_last, bool bias,
                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                 at::IntArrayRef dilation, int64_t device) {
  const auto p = meta_plan(input_size, weight_size, dtype, channels_last, bias, stride, padding, dilation);
  std::vector<std::string> picks;
  for (auto pass : kPasses) {
    const auto c = pass_case(pass, p, bias);
    picks.push_back(decided("depthwise_conv2d", conv::depthwise_has_choice(c), conv::depthwise_rule(c),
                            [&] { return conv::depthwise_key(c, static_cast<int>(device)); }));
  }
  return picks;
}

// An upsample call's cases per pass from its sizes, checked as the op checks them.
std::vector<upsample::Case> upsample_cases(at::IntArrayRef input_size, at::IntArrayRef output_size,
                                           at::ScalarType dtype, bool channels_last, c10::string_view mode) {
  const char* op = "upsample_bilinear2d";
  const auto m = upsample::parse_mode(op, mode);
  TORCH_CHECK(input_size.size() == 4, "customops_backends::upsample_bilinear2d: expected input_size to have 4 "
              "elements (N, C, H, W), got ", input_size.size());
  upsample::check_size<int64_t>(op, "output_size", output_size);
  std::vector<upsample::Case> cases;
  for (auto pass : {upsample::Pass::forward, upsample::Pass::backward}) {
    cases.push_back({pass, dtype, channels_last, m, input_size[0], input_size[1], input_size[2], input_size[3],
                     output_size[0], output_size[1]});
  }
  return cases;
}

std::vector<std::string> upsample_bilinear2d_rule(at::IntArrayRef input_size, at::IntArrayRef output_size,
                                                  at::ScalarType dtype, bool channels_last, c10::string_view mode) {
  std::vector<std::string> picks;
  for (const auto& c : upsample_cases(input_size, output_size, dtype, channels_last, mode)) {
    picks.emplace_back(backend::name(upsample::rule(c)));
  }
  return picks;
}

std::vector<std::string> upsample_bilinear2d_choice(at::IntArrayRef input_size, at::IntArrayRef output_size,
                                                    at::ScalarType dtype, bool channels_last, c10::string_view mode,
                                                    int64_t device) {
  std::vector<std::string> picks;
  for (const auto& c : upsample_cases(input_size, output_size, dtype, channels_last, mode)) {
    picks.push_back(decided("upsample_bilinear2d", upsample::has_choice(c), upsample::rule(c),
                            [&] { return upsample::key(c, static_cast<int>(device)); }));
  }
  return picks;
}

std::vector<int64_t> depthwise_conv2d_route_stats(bool reset) {
  const auto s = conv::depthwise_route_stats(reset);
  return {s.plans, s.choices, s.pytorch_calls, s.layout_copies};
}

// The test route on the CPU: customops' passes are the op's CPU kernel (which makes a plan of its own), PyTorch's
// and the choice as on CUDA, each pass's implementation as given.
conv::DepthwiseRoute cpu_test_route(const std::vector<std::string>& passes) {
  TORCH_CHECK(passes.size() == 3, "customops_backends: expected passes for forward, input_grad and weight_grad, got ",
              passes.size());
  std::array<backend::Impl, 3> picks{};
  for (size_t i = 0; i < 3; ++i) {
    TORCH_CHECK(passes[i] == "customops" || passes[i] == "pytorch",
                "customops_backends: expected each pass to be 'customops' or 'pytorch', got '", passes[i], "'");
    picks[i] = passes[i] == "customops" ? backend::Impl::customops : backend::Impl::pytorch;
  }
  const auto cpu = c10::DispatchKeySet(c10::DispatchKey::CPU);
  const auto window = [](const conv::DepthwisePlan& p) {
    using Pair = std::vector<int64_t>;
    return std::array<Pair, 3>{Pair{p.w.sh, p.w.sw}, Pair{p.w.ph, p.w.pw}, Pair{p.w.dh, p.w.dw}};
  };
  conv::DepthwiseRoute r;
  r.forward = [cpu, window](conv::DepthwisePlan& p) {
    const auto [s, pad, d] = window(p);
    const std::optional<at::Tensor> b = p.bias.defined() ? std::optional(p.bias) : std::nullopt;
    const auto w = p.weight.view({p.s.O, 1, p.w.kh, p.w.kw});
    return conv::unbatch(detail::depthwise_conv2d_op().redispatch(cpu, p.x, w, b, s, pad, d), p.s);
  };
  r.backward = [cpu, window](const conv::DepthwiseBackwardPlan& bp, const at::Tensor& weight, std::array<bool, 3> m) {
    const auto [s, pad, d] = window(bp.p);
    auto grads = detail::depthwise_conv2d_backward_op().redispatch(cpu, bp.gout, bp.p.x, weight, s, pad, d, m);
    if (m[0]) std::get<0>(grads) = conv::unbatch(std::get<0>(grads), bp.p.s);
    return grads;
  };
  r.choose = [picks](conv::DepthwisePass pass, const conv::DepthwisePlan&, bool, const std::function<void()>&,
                     const std::function<void()>&) { return picks[static_cast<size_t>(pass)]; };
  return r;
}

at::Tensor depthwise_conv2d_routed(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                   const std::vector<std::string>& passes) {
  return conv::routed_depthwise_forward(cpu_test_route(passes), input, weight, bias, stride, padding, dilation);
}

conv::Grads depthwise_conv2d_backward_routed(const at::Tensor& grad_out, const at::Tensor& input,
                                             const at::Tensor& weight, at::IntArrayRef stride,
                                             at::IntArrayRef padding, at::IntArrayRef dilation,
                                             std::array<bool, 3> output_mask, const std::vector<std::string>& passes) {
  return conv::routed_depthwise_backward(cpu_test_route(passes), grad_out, input, weight, stride, padding, dilation,
                                         output_mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(customops_backends, CPU, m) {
  m.impl("depthwise_conv2d_routed", &depthwise_conv2d_routed);
  m.impl("depthwise_conv2d_backward_routed", &depthwise_conv2d_backward_routed);
}

TORCH_LIBRARY_IMPL(customops_backends, CompositeImplicitAutograd, m) {
  m.impl("ops", &ops);
  m.impl("set", &set);
  m.impl("get", &get);
  m.impl("timed", &timed);
  m.impl("clear_timed", &clear_timed);
  m.impl("depthwise_conv2d_rule", &depthwise_conv2d_rule);
  m.impl("depthwise_conv2d_choice", &depthwise_conv2d_choice);
  m.impl("upsample_bilinear2d_rule", &upsample_bilinear2d_rule);
  m.impl("upsample_bilinear2d_choice", &upsample_bilinear2d_choice);
  m.impl("depthwise_conv2d_route_stats", &depthwise_conv2d_route_stats);
}

}  // namespace customops
