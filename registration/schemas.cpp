// The one place where customops operator schemas are defined. Kernels for each
// dispatch key are registered by the per-family files beside this one.
#include <torch/library.h>

TORCH_LIBRARY(customops, m) {
  // Every op is functional, has a Meta kernel and a registered backward op, so
  // torch.compile and torch.export may trace through it. Every kernel takes
  // inputs of any strides, and each Meta kernel gives the strides its real
  // kernels give for them (tests/python/test_ops.py checks both): flexible_layout
  // lets Inductor keep the layouts it chose around the ops (channels_last around
  // convolutions) instead of copying inputs into the strides seen while tracing.
  const std::vector<at::Tag> pt2{at::Tag::pt2_compliant_tag, at::Tag::flexible_layout};

  m.def("quick_gelu(Tensor x) -> Tensor", pt2);
  m.def("quick_gelu.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("quick_gelu_backward(Tensor grad_out, Tensor x) -> Tensor", pt2);

  // im2col is col2im's gradient and vice versa; SymInt sizes keep them
  // traceable with dynamic shapes.
  m.def("im2col(Tensor input, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor", pt2);
  m.def("im2col.out(Tensor input, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride, *, "
        "Tensor(a!) out) -> Tensor(a!)");
  m.def("im2col_backward(Tensor grad_out, SymInt[2] input_size, int[2] kernel_size, int[2] dilation, "
        "int[2] padding, int[2] stride) -> Tensor", pt2);
  m.def("col2im(Tensor input, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, "
        "int[2] stride) -> Tensor", pt2);
  m.def("col2im.out(Tensor input, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, "
        "int[2] stride, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("col2im_backward(Tensor grad_out, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) "
        "-> Tensor", pt2);

  // Convolutions. A backward computes the gradients output_mask asks for
  // (input, weight, bias) and returns undefined tensors (None) for the others.
  m.def("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
        "int[2] dilation=1, int groups=1) -> Tensor", pt2);
  m.def("conv2d_backward(Tensor grad_out, Tensor input, Tensor weight, int[2] stride, int[2] padding, "
        "int[2] dilation, int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", pt2);
  m.def("depthwise_conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
        "int[2] dilation=1) -> Tensor", pt2);
  m.def("depthwise_conv2d.out(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
        "int[2] dilation=1, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("depthwise_conv2d_backward(Tensor grad_out, Tensor input, Tensor weight, int[2] stride, int[2] padding, "
        "int[2] dilation, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", pt2);

  // Bilinear resize; coordinate_mode is half_pixel, align_corners or asymmetric
  // (kernels/upsample.h). The backward is the resize's adjoint and gathers.
  m.def("upsample_bilinear2d(Tensor input, SymInt[2] output_size, str coordinate_mode=\"half_pixel\") -> Tensor",
        pt2);
  m.def("upsample_bilinear2d.out(Tensor input, SymInt[2] output_size, str coordinate_mode=\"half_pixel\", *, "
        "Tensor(a!) out) -> Tensor(a!)");
  m.def("upsample_bilinear2d_backward(Tensor grad_out, SymInt[2] input_size, str coordinate_mode=\"half_pixel\") "
        "-> Tensor", pt2);

  // feats (N, 8, F), points (N, 3) -> (N, F); the backward returns the
  // gradients of feats and points that output_mask asks for. The out variant
  // is what ExecuTorch's programs call, run there by customops' kernel
  // (kernels/executorch/; registration/out_variant.h).
  m.def("trilinear_interpolation(Tensor feats, Tensor points) -> Tensor", pt2);
  m.def("trilinear_interpolation.out(Tensor feats, Tensor points, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("trilinear_interpolation_backward(Tensor grad_out, Tensor feats, Tensor points, bool[2] output_mask) "
        "-> (Tensor, Tensor)", pt2);
  m.def("silu_mul(Tensor a, Tensor b) -> Tensor", pt2);
  m.def("silu_mul.out(Tensor a, Tensor b, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("silu_mul_backward(Tensor grad_out, Tensor a, Tensor b) -> (Tensor, Tensor)", pt2);

  // x (B, C, L), weight (C, K), bias (C) -> (B, C, L), each step from itself and the K-1 before it; the
  // backward returns the gradients of x, weight and bias that output_mask asks for.
  m.def("causal_conv1d(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", pt2);
  m.def("causal_conv1d.out(Tensor x, Tensor weight, Tensor? bias=None, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("causal_conv1d_backward(Tensor grad_out, Tensor x, Tensor weight, bool[3] output_mask) "
        "-> (Tensor, Tensor, Tensor)", pt2);
  // The training call as Mamba's causal-conv1d takes it: activation None, "silu" or "swish" fused; seq_idx
  // (B, L) int32 for packed sequences (a step sees only earlier steps of its own index); initial_states
  // (B, C, K-1) as the steps before t = 0. Results keep x's layout (channel-last or contiguous). Its backward
  // adds the gradient of initial_states.
  m.def("causal_conv1d.mamba(Tensor x, Tensor weight, Tensor? bias=None, *, str? activation=None, "
        "Tensor? seq_idx=None, Tensor? initial_states=None) -> Tensor", pt2);
  m.def("causal_conv1d_backward.mamba(Tensor grad_out, Tensor x, Tensor weight, Tensor? bias, bool[4] output_mask, "
        "*, str? activation=None, Tensor? seq_idx=None, Tensor? initial_states=None) "
        "-> (Tensor, Tensor, Tensor, Tensor)", pt2);
  // The decoding step (Mamba's causal_conv1d_update): x (B, C) or (B, C, L) new steps after those held in
  // conv_state (B_cache, C, S >= K-1), which it updates in place (the last S steps, or written into a circular
  // buffer at cache_seqlens (B,) int32); conv_state_indices (B,) int32 picks each row's state, -1 a padding row
  // (zeros out, state untouched). Inference only: no backward. Its out variant is what ExecuTorch's programs call.
  m.def("causal_conv1d.update(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias=None, *, "
        "str? activation=None, Tensor? cache_seqlens=None, Tensor? conv_state_indices=None) -> Tensor", pt2);
  m.def("causal_conv1d.update_out(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias=None, *, "
        "str? activation=None, Tensor? cache_seqlens=None, Tensor? conv_state_indices=None, Tensor(b!) out) "
        "-> Tensor(b!)");

  m.def("gelu_tanh_mul(Tensor a, Tensor b) -> Tensor", pt2);
  m.def("gelu_tanh_mul.out(Tensor a, Tensor b, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("gelu_tanh_mul_backward(Tensor grad_out, Tensor a, Tensor b) -> (Tensor, Tensor)", pt2);
}

// Which implementation an op runs on CUDA where PyTorch has a competing kernel (kernels/common/
// backend_choice.h); customops.backends is their Python face. Not operators of the model: no tensors.
TORCH_LIBRARY(customops_backends, m) {
  m.def("ops() -> str[]");
  m.def("set(str op, str backend) -> ()");
  m.def("get(str op) -> str");
  m.def("timed() -> str[]");
  m.def("clear_timed() -> ()");
  // What the rule picks per pass (forward, input_grad, weight_grad) for a depthwise layer's call on CUDA.
  m.def("depthwise_conv2d_rule(int[] input_size, int[] weight_size, ScalarType dtype, bool channels_last, "
        "bool bias, int[2] stride, int[2] padding, int[2] dilation) -> str[]");
  // What such a call on CUDA device `device` runs per pass now: the policy, the benchmark mode's timed choice
  // ("untimed" where the shape has not been timed yet) or the rule. Compiled graphs decide by it.
  m.def("depthwise_conv2d_choice(int[] input_size, int[] weight_size, ScalarType dtype, bool channels_last, "
        "bool bias, int[2] stride, int[2] padding, int[2] dilation, int device) -> str[]");
  // The same for an upsample_bilinear2d call, per pass (forward, backward).
  m.def("upsample_bilinear2d_rule(int[4] input_size, int[2] output_size, ScalarType dtype, bool channels_last, "
        "str coordinate_mode) -> str[]");
  m.def("upsample_bilinear2d_choice(int[4] input_size, int[2] output_size, ScalarType dtype, bool channels_last, "
        "str coordinate_mode, int device) -> str[]");
  // For the tests of the routed depthwise calls (kernels/common/depthwise_route.h): what they did since the last
  // reset ([plans, choices, pytorch_calls, layout_copies]), and a CPU call through the same route with each pass's
  // implementation given (passes: forward, input_grad, weight_grad; "customops" or "pytorch").
  m.def("depthwise_conv2d_route_stats(bool reset=False) -> int[]");
  m.def("depthwise_conv2d_routed(Tensor input, Tensor weight, Tensor? bias, int[2] stride, int[2] padding, "
        "int[2] dilation, str[3] passes) -> Tensor");
  m.def("depthwise_conv2d_backward_routed(Tensor grad_out, Tensor input, Tensor weight, int[2] stride, "
        "int[2] padding, int[2] dilation, bool[3] output_mask, str[3] passes) -> (Tensor, Tensor, Tensor)");
}
