// Convolution family: conv2d (im2col + GEMM) and depthwise_conv2d (direct
// kernels). Both take NCHW input (or unbatched CHW) and OIHW weights, and share
// the argument checks and output geometry below.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/common/backend_choice.h"
#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"
#include "kernels/fold.h"

namespace customops::conv {

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;  // input, weight, bias

template <typename Int>
struct Shape {
  Int N, C, H, W, O, out_h, out_w;
  bool batched;
};

inline c10::ArrayRef<int64_t> sizes_of(const at::Tensor& t, int64_t) {
  return t.sizes();
}
inline c10::SymIntArrayRef sizes_of(const at::Tensor& t, const c10::SymInt&) {
  return t.sym_sizes();
}

// Checks every argument of a convolution with `groups` groups (depthwise: one
// group per input channel) and returns its sizes; *window receives the kernel
// size (from weight), stride, padding and dilation. Int is int64_t in the CPU
// and CUDA kernels and c10::SymInt in the Meta kernels (whose kernel sizes get
// specialised: they pick code paths).
template <typename Int>
Shape<Int> check(const char* op, bool depthwise, const at::Tensor& input, const at::Tensor& weight,
                 const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                 at::IntArrayRef dilation, int64_t groups, fold::Window* window) {
  checks::floating(op, "input", input);
  checks::floating(op, "weight", weight);
  checks::same_dtype(op, "weight", weight, "input", input);
  checks::same_device(op, "weight", weight, "input", input);
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "customops::", op,
              ": expected input to be a 3-D (C, H, W) or 4-D (N, C, H, W) tensor, got ", input.dim(), "-D");
  const char* weight_shape = depthwise ? "(C*m, 1, kh, kw)" : "(out_channels, in_channels/groups, kh, kw)";
  TORCH_CHECK(weight.dim() == 4, "customops::", op, ": expected weight to be a 4-D ", weight_shape,
              " tensor, got ", weight.dim(), "-D");
  const auto in = sizes_of(input, Int{});
  const auto ws = sizes_of(weight, Int{});
  const bool batched = input.dim() == 4;
  const Int N = batched ? in[0] : Int(1);
  const Int &C = in[in.size() - 3], &H = in[in.size() - 2], &W = in[in.size() - 1];
  TORCH_CHECK(checks::holds(C > 0) && checks::holds(H > 0) && checks::holds(W > 0), "customops::", op,
              ": expected input to have non-empty C, H and W dimensions, got ", in);
  TORCH_CHECK(checks::holds(ws[0] > 0) && checks::holds(ws[2] > 0) && checks::holds(ws[3] > 0), "customops::", op,
              ": expected weight to be a non-empty ", weight_shape, " tensor, got ", ws);
  TORCH_CHECK(groups >= 1, "customops::", op, ": expected groups to be positive, got ", groups);
  if (depthwise) {
    TORCH_CHECK(checks::holds(ws[1] == 1) && checks::holds(ws[0] % C == 0), "customops::", op,
                ": expected weight of shape (C*m, 1, kh, kw) for input with C = ", C, " channels, got ", ws);
  } else {
    TORCH_CHECK(checks::holds(C % groups == 0), "customops::", op, ": expected groups (", groups,
                ") to divide the input's channels (", C, ")");
    TORCH_CHECK(checks::holds(ws[0] % groups == 0), "customops::", op, ": expected groups (", groups,
                ") to divide weight's output channels (", ws[0], ")");
    // C / groups, not ws[1] * groups: a huge groups would wrap the product.
    TORCH_CHECK(checks::holds(ws[1] == C / groups), "customops::", op, ": expected weight's dimension 1 (", ws[1],
                ") to be the input's channels (", C, ") / groups (", groups, ")");
  }
  if (bias.has_value() && bias->defined()) {
    checks::floating(op, "bias", *bias);
    checks::same_dtype(op, "bias", *bias, "input", input);
    checks::same_device(op, "bias", *bias, "input", input);
    TORCH_CHECK(bias->dim() == 1 && checks::holds(sizes_of(*bias, Int{})[0] == ws[0]), "customops::", op,
                ": expected bias to be a 1-D tensor of ", ws[0], " elements (weight's output channels), got shape ",
                sizes_of(*bias, Int{}));
  }
  const int64_t kh = weight.sym_size(2).guard_int(__FILE__, __LINE__);
  const int64_t kw = weight.sym_size(3).guard_int(__FILE__, __LINE__);
  *window = fold::window(op, {kh, kw}, dilation, padding, stride);
  const fold::Window& w = *window;
  const Int out_h = fold::positions<Int>(op, "height", H, w.kh, w.dh, w.ph, w.sh);
  const Int out_w = fold::positions<Int>(op, "width", W, w.kw, w.dw, w.pw, w.sw);
  checks::result_fits<Int>(op, std::vector<Int>{N, ws[0], out_h, out_w}, input,
                           "input, weight, padding, stride and dilation");
  // The dilation along an axis of one tap changes nothing (not the output
  // size either); set to 1, a huge value given there cannot overflow the
  // kernels' window arithmetic (dilation * row pitch, rows chained dilation /
  // stride apart: heap corruption in the CPU depthwise kernels with dilation
  // 2^63 - 1 over a filter of height 1) nor truncate to a CUDA kernel's 32-bit
  // parameters.
  if (window->kh == 1) window->dh = 1;
  if (window->kw == 1) window->dw = 1;
  // The kernels make dense copies of expanded arguments.
  checks::dense_fits(op, "input", input);
  checks::dense_fits(op, "weight", weight);
  if (bias.has_value()) checks::dense_fits(op, "bias", *bias);
  return {N, C, H, W, ws[0], out_h, out_w, batched};
}

// Every tensor argument on input's device. The CUDA kernels check it before
// they enter the input's device (a CPU tensor would fail that with an
// unhelpful message).
inline void check_devices(const char* op, const at::Tensor& input, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, const at::Tensor& grad_out = {}) {
  checks::same_device(op, "weight", weight, "input", input);
  if (bias.has_value() && bias->defined()) checks::same_device(op, "bias", *bias, "input", input);
  if (grad_out.defined()) checks::same_device(op, "grad_out", grad_out, "input", input);
}

// grad_out must have the forward output's shape.
template <typename Int>
void check_grad_out(const char* op, const at::Tensor& grad_out, const at::Tensor& input, const Shape<Int>& s) {
  checks::floating(op, "grad_out", grad_out);
  checks::same_dtype(op, "grad_out", grad_out, "input", input);
  checks::same_device(op, "grad_out", grad_out, "input", input);
  const auto g = sizes_of(grad_out, Int{});
  const bool ok = s.batched ? g.size() == 4 && checks::holds(g[0] == s.N) && checks::holds(g[1] == s.O) &&
                                  checks::holds(g[2] == s.out_h) && checks::holds(g[3] == s.out_w)
                            : g.size() == 3 && checks::holds(g[0] == s.O) && checks::holds(g[1] == s.out_h) &&
                                  checks::holds(g[2] == s.out_w);
  TORCH_CHECK(ok, "customops::", op, ": expected grad_out to have the output's shape (",
              s.batched ? "N, " : "", s.O, ", ", s.out_h, ", ", s.out_w, "), got ", g);
}

// The column buffer of conv2d is built this many bytes at a time (a chunk of
// the batch, at least one image): CUSTOMOPS_CONV2D_WORKSPACE_MIB, default 256.
int64_t workspace_limit_bytes();

// The GEMM formulation, written once in ATen ops for every device: the backend
// only supplies its fold kernels and its conversion between memory formats.
struct GemmBackend {
  void (*im2col)(const fold::Plan&);
  void (*col2im)(const fold::Plan&);
  at::Tensor (*to_format)(const at::Tensor&, at::MemoryFormat);  // t itself when it already is in the format
};
at::Tensor gemm_forward(const GemmBackend& backend, const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                        at::IntArrayRef dilation, int64_t groups);
Grads gemm_backward(const GemmBackend& backend, const at::Tensor& grad_out, const at::Tensor& input,
                    const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                    at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask);

// The memory format of a convolution's output and input gradient, as in
// PyTorch: channels_last when a batched input's strides are channels_last
// (also a permuted NHWC tensor, as ConvNeXt's blocks hand on), else
// contiguous. A tensor that is both (C == 1, or H == W == 1: one memory
// order) counts as contiguous. The Meta kernels use it too, so fake tensors
// get the real strides.
inline at::MemoryFormat result_format(const at::Tensor& input) {
  return input.dim() == 4 && input.suggest_memory_format() == at::MemoryFormat::ChannelsLast &&
                 !input.is_contiguous()
             ? at::MemoryFormat::ChannelsLast
             : at::MemoryFormat::Contiguous;
}

// What the depthwise kernels of every device need once the arguments are
// checked: a 4-D input dense in the result format (NCHW, or NHWC in memory when
// channels_last), (O, kh*kw) contiguous weights, the output allocated in the
// same format. The kernels run natively in either layout: none is converted.
struct DepthwisePlan {
  Shape<int64_t> s;
  fold::Window w;
  int64_t m;  // channel multiplier: output channel o reads input channel o / m
  at::Tensor x, weight, bias, out;  // bias may be undefined
  bool channels_last;  // x, out (and a backward plan's gout) are NHWC in memory
};
// allocate=false leaves out undefined (the CUDA op allocates it once it has chosen its kernels).
DepthwisePlan depthwise_plan(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                             bool allocate = true);
// The output of a plan made with allocate=false.
at::Tensor allocate_output(const DepthwisePlan& p);

// The same for the backward op: gout 4-D, dense in the plan's format; out unused.
struct DepthwiseBackwardPlan {
  DepthwisePlan p;
  at::Tensor gout;
};
DepthwiseBackwardPlan depthwise_backward_plan(const at::Tensor& grad_out, const at::Tensor& input,
                                              const at::Tensor& weight, at::IntArrayRef stride,
                                              at::IntArrayRef padding, at::IntArrayRef dilation);

// Which implementation runs a depthwise pass on CUDA where the policy is "auto" and no timing decides
// (kernels/common/depthwise_rule.cpp: the rule and the measurements behind it).
enum class DepthwisePass : uint8_t { forward, input_grad, weight_grad };
struct DepthwiseCase {
  DepthwisePass pass;
  int64_t N, C, H, W, m, kh, kw, sh, sw, dh, dw, ph, pw, out_h, out_w;
  at::ScalarType dtype;
  bool channels_last, bias;
};
DepthwiseCase depthwise_case(DepthwisePass pass, const DepthwisePlan& p, bool bias);
// Whether the input gradient walks whole stride periods (kernels/cuda/depthwise_conv2d/period_dgrad.cu): a square
// window of 3, 5 or 7 taps at stride 2 both ways, dilation 1, one output channel per input channel; in
// channels_last only 3x3, and 5x5 where a pixel's channels are not whole 16-byte words (pixel_bytes), since the
// row gather kernel of nhwc.cu ran the others faster (the 7x7 up to 4.8x, the kernel's weights fill its registers).
inline bool period_dgrad_applies(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t m,
                                 bool channels_last, int64_t pixel_bytes) {
  const bool square = kh == kw && (kh == 3 || kh == 5 || kh == 7) && sh == 2 && sw == 2 && dh == 1 && dw == 1;
  return square && m == 1 && (!channels_last || kh == 3 || (kh == 5 && pixel_bytes % 16 != 0));
}
backend::Impl depthwise_rule(const DepthwiseCase& c);
// Whether PyTorch's kernels may run the case at all (an empty batch or output stays with customops).
bool depthwise_has_choice(const DepthwiseCase& c);
// The shape's key among timed choices.
std::string depthwise_key(const DepthwiseCase& c, int device);
const char* pass_name(DepthwisePass pass);

// Drops the batch dimension of results for unbatched inputs.
at::Tensor unbatch(const at::Tensor& t, const Shape<int64_t>& s);

} // namespace customops::conv

namespace customops {

// The four kernels, with the same signatures in every backend.
#define CUSTOMOPS_CONV_KERNELS                                                                                 \
  at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,   \
                    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);  \
  conv::Grads conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,   \
                              at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,       \
                              int64_t groups, std::array<bool, 3> output_mask);                                \
  at::Tensor depthwise_conv2d(const at::Tensor& input, const at::Tensor& weight,                               \
                              const std::optional<at::Tensor>& bias, at::IntArrayRef stride,                   \
                              at::IntArrayRef padding, at::IntArrayRef dilation);                              \
  conv::Grads depthwise_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input,                   \
                                        const at::Tensor& weight, at::IntArrayRef stride,                      \
                                        at::IntArrayRef padding, at::IntArrayRef dilation,                     \
                                        std::array<bool, 3> output_mask);

namespace cpu {
CUSTOMOPS_CPU_DECLARE(CUSTOMOPS_CONV_KERNELS)
} // namespace cpu

namespace cuda {
CUSTOMOPS_CONV_KERNELS
} // namespace cuda

namespace meta {
CUSTOMOPS_CONV_KERNELS
} // namespace meta

} // namespace customops
