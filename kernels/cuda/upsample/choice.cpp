// upsample_bilinear2d on CUDA: each pass runs customops' kernels (upsample.cu) or PyTorch's
// (aten::upsample_bilinear2d and its backward, for the half_pixel and align_corners conventions), whichever
// kernels/cuda/common/timed_choice.h picks: the faster per shape, by the rule of
// kernels/common/upsample_rule.cpp or by timing both in cuDNN's benchmark mode. PyTorch's kernels write into
// the plan's result, so results come in the layout customops' kernels give (the Meta kernels' promise).
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_bilinear2d_backward.h>

#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/timed_choice.h"
#include "kernels/cuda/upsample/kernels.h"

namespace customops::cuda {
namespace {

using backend::Impl;
constexpr const char* kOp = "upsample_bilinear2d";

Impl choose_pass(upsample::Pass pass, const upsample::Plan& p, const std::function<void()>& ours,
                 const std::function<void()>& theirs) {
  const auto c = upsample::make_case(pass, p, p.input.scalar_type());
  const auto key = [&] { return upsample::key(c, p.input.get_device()); };
  return choose(kOp, upsample::has_choice(c), upsample::rule(c), key, ours, theirs);
}

}  // namespace

at::Tensor upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size, c10::string_view mode) {
  const KernelGuard guard(input.device());
  const auto p = upsample::plan_forward(input, output_size, mode);
  if (p.output.numel() == 0) return p.output;
  const bool align_corners = p.mode == upsample::Mode::AlignCorners;
  auto ours = [&] { upsample_forward_kernels(p); };
  at::Tensor out = p.output;
  auto theirs = [&] { at::upsample_bilinear2d_out(out, p.input, output_size, align_corners); };
  if (choose_pass(upsample::Pass::forward, p, ours, theirs) == Impl::customops) {
    ours();
  } else {
    theirs();
  }
  return p.output;
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_out, at::IntArrayRef input_size,
                                        c10::string_view mode) {
  const KernelGuard guard(grad_out.device());
  const auto p = upsample::plan_backward(grad_out, input_size, mode);
  if (p.output.numel() == 0) return p.output;
  const bool align_corners = p.mode == upsample::Mode::AlignCorners;
  const int64_t out_size[2] = {p.out_h, p.out_w}, in_size[4] = {p.N, p.C, p.in_h, p.in_w};
  auto ours = [&] { upsample_backward_kernels(p); };
  at::Tensor grad_in = p.output;
  auto theirs = [&] { at::upsample_bilinear2d_backward_out(grad_in, p.input, out_size, in_size, align_corners); };
  if (choose_pass(upsample::Pass::backward, p, ours, theirs) == Impl::customops) {
    ours();
  } else {
    theirs();
  }
  return p.output;
}

}  // namespace customops::cuda
