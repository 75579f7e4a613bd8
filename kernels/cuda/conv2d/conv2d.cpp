// conv2d on CUDA. Three algorithms:
//  - implicit GEMM (kernels/cuda/conv2d/implicit_*_sm90.cu, CUTLASS): the im2col gather inside the GEMM, on
//    channels_last tensors, for the calls it takes (implicit_gemm::supports): sm_90 devices, float16 and
//    bfloat16 (forward and gradients; unit-stride input gradient), float32 as TF32 where allowed (forward and
//    unit-stride input gradient), one group, aligned channel counts. An NCHW call goes through a conversion to
//    channels_last and back (kernels/cuda/common/memory_format.cu).
//  - direct kernels: grouped (kernels/cuda/conv2d/grouped*.cu) for groups > 1 of at most 32 channels each (any
//    GPU, float16, bfloat16, float32; NCHW calls converted like the implicit path's), and stem
//    (kernels/cuda/conv2d/stem*.cu) for channels_last images of 1-7 channels (sm_80+, float16, bfloat16, TF32),
//    and the float32 weight gradient in TF32 where allowed (kernels/cuda/conv2d/tf32_wgrad.cu: sm_80+, one
//    group, channels multiples of 4), which CUTLASS's SM90 kernels do not have, and the float16 and bfloat16
//    weight gradient of at most 64 channels (kernels/cuda/conv2d/half_wgrad.cu: sm_80+, one group, channels
//    multiples of 8), where CUTLASS's runs slower.
//  - explicit GEMM (kernels/common/conv2d_gemm.cpp): im2col/col2im over the CUDA fold kernels + cuBLAS,
//    for everything else, on the current stream; 1x1 unit-stride unpadded convolutions are plain GEMMs there.
// CUSTOMOPS_CONV2D_ALGO=explicit forces the last (tests, benchmarks, the textbook algorithm); `implicit`
// also gives the first the 1x1 convolutions and the half types' weight gradients of few channels, and the TF32
// weight-gradient kernel the shapes it measured slower on; `direct` gives the two direct weight-gradient kernels
// every call they can take. TORCH_CPP_LOG_LEVEL=INFO logs each choice.
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/cuda/CUDAEvent.h>
#include "kernels/cuda/common/device_guard.h"
#include <c10/cuda/CUDAMacros.h>
#include <c10/util/Logging.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/conv2d.h"
#include "kernels/cuda/common/memory_format.h"
#include "kernels/cuda/conv2d/grouped.h"
#include "kernels/cuda/conv2d/half_wgrad.h"
#include "kernels/cuda/conv2d/implicit.h"
#include "kernels/cuda/conv2d/partials.h"
#include "kernels/cuda/conv2d/stem.h"
#include "kernels/cuda/conv2d/tf32_wgrad.h"

namespace customops::cuda {
namespace {

// CUSTOMOPS_CONV2D_ALGO, read per call (like the workspace limit) so that tests and benchmarks can switch.
bool algo_is(const char* name) {
  const char* algo = std::getenv("CUSTOMOPS_CONV2D_ALGO");
  return algo != nullptr && std::strcmp(algo, name) == 0;
}

// A 1x1 unit-stride unpadded convolution: one GEMM, which cuBLAS runs for most of its passes.
bool pointwise(const implicit_gemm::Geometry& g) {
  return g.R == 1 && g.S == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

} // namespace

namespace implicit_gemm {

const char* describe(Refusal r) {
  switch (r) {
    case Refusal::kNone: return "implicit GEMM";
    case Refusal::kNotBuilt: return "explicit GEMM: the implicit-GEMM kernels are not built (needs CUTLASS and sm_90)";
    case Refusal::kDevice: return "explicit GEMM: the device is not compute capability 9.0";
    case Refusal::kDtype: return "explicit GEMM: dtype without implicit-GEMM kernels for this pass";
    case Refusal::kTf32Off: return "explicit GEMM: float32 without TF32 (torch.backends.cuda.matmul.allow_tf32)";
    case Refusal::kGroups: return "explicit GEMM: groups > 1";
    case Refusal::kAlignment: return "explicit GEMM: channels or pointers not 16-byte aligned";
    case Refusal::kSize: return "explicit GEMM: an empty batch, or a size beyond the kernels' 32-bit indexing";
    case Refusal::kStride: return "explicit GEMM: strided input gradient (CUTLASS's kernel computes it wrong)";
    case Refusal::kPadding:
      return "explicit GEMM: TF32 input gradient with padding beyond the dilated kernel (no flipped-filter forward)";
    case Refusal::kPointwise:
      return "explicit GEMM: a 1x1 unit-stride unpadded convolution is one cuBLAS GEMM (its gradients; an NCHW forward)";
    case Refusal::kCutlass: return "explicit GEMM: CUTLASS's can_implement refused the problem";
    case Refusal::kSlower: return "explicit GEMM: measured faster for this shape";
    case Refusal::kForced: return "explicit GEMM: CUSTOMOPS_CONV2D_ALGO=explicit";
  }
  return "?";
}

Refusal supports(const at::Tensor& input, const Geometry& g, int64_t groups, Pass pass_, bool channels_last,
                 bool allow_tf32) {
  if (algo_is("explicit")) return Refusal::kForced;
#ifndef CUSTOMOPS_WITH_SM90_CONV
  return Refusal::kNotBuilt;
#else
  const auto* props = at::cuda::getDeviceProperties(input.get_device());
  if (props->major != 9 || props->minor != 0) return Refusal::kDevice;
  const auto dtype = input.scalar_type();
  int64_t align = 8;  // elements per 16 bytes
  if (dtype == at::kFloat && pass_ != Pass::kWeightGrad) {
    if (!allow_tf32) return Refusal::kTf32Off;
    align = 4;
  } else if (dtype != at::kHalf && dtype != at::kBFloat16) {
    return Refusal::kDtype;
  }
  if (groups != 1) return Refusal::kGroups;
  if (g.C % align != 0 || g.K % align != 0) return Refusal::kAlignment;
  if (g.N == 0) return Refusal::kSize;  // nothing to compute; CUTLASS's tiling divides by the GEMM's M
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  const bool fits = g.N * g.H * g.W * g.C <= kMax && g.N * g.P * g.Q * g.K <= kMax && g.N * g.P * g.Q <= kMax &&
                    g.N * g.H * g.W <= kMax && g.K * g.R * g.S * g.C <= kMax;
  if (!fits) return Refusal::kSize;
  // CUTLASS holds padding, stride and dilation as int (problem()) and derives the output size from them in int:
  // H + 2 * pad - ((R - 1) * dil + 1). The TF32 input gradient's forward pads grad_out by dil * (R - 1) - pad, which
  // reaches H + dil * (R - 1). Both sums fit int64 (each term is below 2^31 or a size) and must fit int.
  if (!window_fits_int32(g) || g.H + 2 * g.pad_h + g.dil_h * (g.R - 1) > kMax ||
      g.W + 2 * g.pad_w + g.dil_w * (g.S - 1) > kMax) {
    return Refusal::kSize;
  }
  // CUTLASS's SM90 input-gradient kernel accepts strides and computes wrong values for them.
  if (pass_ == Pass::kInputGrad && (g.stride_h != 1 || g.stride_w != 1)) return Refusal::kStride;
  if (pass_ == Pass::kInputGrad && dtype == at::kFloat &&
      (g.pad_h > g.dil_h * (g.R - 1) || g.pad_w > g.dil_w * (g.S - 1))) {
    return Refusal::kPadding;
  }
  // A 1x1 unit-stride unpadded convolution is one GEMM: cuBLAS ran its gradients at half the implicit kernels'
  // time on an H100 and its forward on NCHW memory without the conversions; the implicit forward was faster
  // on NHWC memory (float16 64x256x56x56 -> 64: 0.080 against 0.096 ms).
  if (pointwise(g) && !algo_is("implicit") && (pass_ != Pass::kForward || !channels_last)) return Refusal::kPointwise;
  return Refusal::kNone;
#endif
}

// The weight gradient's tile and batch split, by a wave model: a chunk's launch takes
//   ceil(tiles x splits / SMs) waves x (tile area x pixels per chunk) / tile efficiency
// plus a fixed cost per extra chunk (its launch on a pool stream and its partial sum). Small tiles give more
// CTAs to fill the GPU with; large ones reuse each loaded operand over more outputs. The efficiencies, the chunk
// cost and the smallest chunk (kMinPixels output pixels) were fitted on an H100 to queued timings of 3 tiles x
// 6 split counts over 19 3x3 shapes (ResNet-50's at batch 16-256, strided, VGG, U-Net, the benchmark table's):
// the model's pick took 5% longer than the fastest measured on average, 1.36x at worst (128 channels at
// 112x112, batch 16), where the 64x64 tile alone (split to fill the last wave) took 1.0-1.9x the fastest.
WeightGradPlan plan_weight_grad(const Geometry& g, int64_t sms, int64_t most_splits) {
  constexpr int64_t kMinPixels = 8192;
  constexpr double kChunkCost = 2e7;  // in the model's units of tile area x pixels
  struct Option {
    WeightGradTile tile;
    int64_t m, n;
    double efficiency;
  };
  constexpr std::array<Option, 3> options{{{WeightGradTile::k64x64, 64, 64, 0.45},
                                           {WeightGradTile::k128x64, 128, 64, 0.9},
                                           {WeightGradTile::k128x128, 128, 128, 1.0}}};
  const int64_t pixels = g.N * g.P * g.Q;
  const int64_t most = std::max<int64_t>(1, std::min({pixels / kMinPixels, g.N, most_splits}));
  WeightGradPlan best{WeightGradTile::k64x64, 1};
  double best_cost = -1;
  for (const auto& o : options) {
    const int64_t tiles = ((g.K + o.m - 1) / o.m) * ((g.R * g.S * g.C + o.n - 1) / o.n);
    for (const int64_t s : {1, 2, 3, 4, 6, 8}) {  // the split counts measured
      if (s > most) break;
      const int64_t waves = (tiles * s + sms - 1) / sms;
      const double cost = static_cast<double>(waves) * static_cast<double>(o.m * o.n) *
                              static_cast<double>((pixels + s - 1) / s) / o.efficiency +
                          kChunkCost * static_cast<double>(s - 1);
      if (best_cost < 0 || cost < best_cost) {
        best = {o.tile, s};
        best_cost = cost;
      }
    }
  }
  return best;
}

} // namespace implicit_gemm

namespace {

const conv::GemmBackend kBackend{&im2col_into, &col2im_into, &to_format};

using implicit_gemm::Pass;
using implicit_gemm::Refusal;

constexpr int64_t kMaxWeightGradSplits = 8;  // more launches cost more host time than the SMs they fill

implicit_gemm::Geometry geometry(const conv::Shape<int64_t>& s, const fold::Window& w) {
  return {s.N, s.H, s.W, s.C, s.O, w.kh, w.kw, s.out_h, s.out_w, w.ph, w.pw, w.sh, w.sw, w.dh, w.dw};
}

// TMA reads and writes 16-byte aligned rows.
bool aligned(const at::Tensor& t) {
  return !t.defined() || reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0;
}

// A 4-D tensor dense in NHWC memory (the kernels derive packed strides from the sizes).
at::Tensor nhwc(const at::Tensor& t) {
  return to_format(t, at::MemoryFormat::ChannelsLast);
}

bool channels_last(const at::Tensor& input) {
  return conv::result_format(input) == at::MemoryFormat::ChannelsLast;
}

// A result of the fast kernels (batched, NHWC) in the memory format PyTorch gives input's convolution, and without
// the batch dimension where input has none (contiguous then: the Meta kernels' strides).
at::Tensor like_input(const at::Tensor& nhwc_result, const at::Tensor& input) {
  const auto out = to_format(nhwc_result, conv::result_format(input));
  return input.dim() == 4 ? out : out.squeeze(0);
}

// Whether the stem kernels take a call (few input channels, which the implicit GEMM refuses for alignment). NCHW
// calls too, through the layout conversions, in the half types where the filter windows overlap: there im2col
// multiplies the image, and on an H100 (float16 32x3x224x224, 7x7 stride 2, 2026-11-26) the explicit path took
// 0.22 / 0.62 / 0.43 ms for the forward / input / weight gradient against 0.14 / 0.34 / 0.19; a patchify stem's
// im2col (4x4 stride 4) is a reshuffle, and there the explicit path won (0.03 / 0.09 / 0.04 against 0.05 / 0.11 /
// 0.07). NCHW float32 stays explicit: as TF32 only the weight gradient gained (float32's transposes cost twice as
// much: 7x7 stride 2 forward 0.26 against 0.26, input gradient 0.57 against 0.67, weight gradient 0.37 against 0.33).
bool stem_path(const at::Tensor& input, const implicit_gemm::Geometry& g, int64_t groups, Pass pass_) {
  const auto dtype = input.scalar_type();
  const bool overlapping = g.R * g.S > g.stride_h * g.stride_w;
  const bool layout = channels_last(input) || ((dtype == at::kHalf || dtype == at::kBFloat16) && overlapping);
  return !algo_is("explicit") && layout &&
         stem::takes(dtype, g, groups, pass_, at::globalContext().allowTF32CuBLAS());
}

// Whether the float32 weight gradient goes to the TF32 kernel (one group; not the stem's few channels).
bool tf32_weight_grad_path(const at::Tensor& input, Pass pass_) {
  return pass_ == Pass::kWeightGrad && input.scalar_type() == at::kFloat;
}

// Whether a half-type weight gradient goes to the direct kernel (one group, not the stem's few channels, not a
// 1x1 GEMM) rather than the implicit GEMM.
bool half_weight_grad_path(const at::Tensor& input, const implicit_gemm::Geometry& g, int64_t groups, Pass pass_) {
  if (pass_ != Pass::kWeightGrad || groups != 1 || algo_is("explicit") || algo_is("implicit")) return false;
  const bool direct = algo_is("direct");
  if (pointwise(g) && !direct) return false;
  const Refusal r = half_wgrad::supports_weight_grad(input.scalar_type(), g);
  return r == Refusal::kNone || (r == Refusal::kSlower && direct);
}

// Whether the fast path takes a call: the direct grouped kernels for groups > 1; for one group the stem kernels
// where they apply, the TF32 kernel for float32 weight gradients, the half-type one where it is faster, else the
// implicit GEMM.
Refusal fast_path(const at::Tensor& input, const implicit_gemm::Geometry& g, int64_t groups, Pass pass_,
                  bool allow_tf32) {
  if (groups > 1) return algo_is("explicit") ? Refusal::kForced : grouped::supports(input.scalar_type(), g, groups);
  if (stem_path(input, g, groups, pass_)) return Refusal::kNone;
  if (tf32_weight_grad_path(input, pass_)) {
    if (algo_is("explicit")) return Refusal::kForced;
    if (!allow_tf32) return Refusal::kTf32Off;
    // A 1x1 unit-stride unpadded convolution's weight gradient is one GEMM: cuBLAS's (the explicit path's).
    if (pointwise(g) && !algo_is("implicit") && !algo_is("direct")) return Refusal::kPointwise;
    const Refusal r = tf32::supports_weight_grad(input.scalar_type(), g, channels_last(input));
    return r == Refusal::kSlower && (algo_is("implicit") || algo_is("direct")) ? Refusal::kNone : r;
  }
  if (half_weight_grad_path(input, g, groups, pass_)) return Refusal::kNone;
  return implicit_gemm::supports(input, g, groups, pass_, channels_last(input), allow_tf32);
}

void log_choice(Pass pass_, Refusal r, const implicit_gemm::Geometry& g, int64_t groups, const at::Tensor& input) {
#ifndef C10_USE_GLOG
  if (FLAGS_caffe2_log_level > c10::GLOG_INFO) return;  // skip formatting a message nobody sees
#endif
  const char* name = pass_ == Pass::kForward ? "forward" : pass_ == Pass::kInputGrad ? "input grad" : "weight grad";
  const bool tf32 = groups == 1 && !stem_path(input, g, groups, pass_) && tf32_weight_grad_path(input, pass_);
  const char* why = groups > 1                                                  ? grouped::describe(r)
                    : r == Refusal::kNone && stem_path(input, g, groups, pass_) ? "direct stem kernel"
                    : tf32 && r == Refusal::kNone                               ? "direct TF32 kernel"
                    : r == Refusal::kNone && half_weight_grad_path(input, g, groups, pass_)
                        ? "direct half-type weight-gradient kernel"
                    : tf32 && r == Refusal::kDevice ? "explicit GEMM: the TF32 kernel needs compute capability 8.0"
                                                    : implicit_gemm::describe(r);
  LOG(INFO) << "customops::conv2d " << name << " " << input.scalar_type() << " N" << g.N << " C" << g.C << " "
            << g.H << "x" << g.W << " -> K" << g.K << " " << g.R << "x" << g.S << " groups " << groups << ": " << why;
}

// The fast path's forward, or an undefined tensor when it does not take the call.
at::Tensor fast_forward(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  fold::Window w{};
  const auto s = conv::check<int64_t>("conv2d", false, input, weight, bias, stride, padding, dilation, groups, &w);
  const auto g = geometry(s, w);
  Refusal r = fast_path(input, g, groups, Pass::kForward, at::globalContext().allowTF32CuBLAS());
  at::Tensor y;
  if (r == Refusal::kNone) {
    const auto x = nhwc(s.batched ? input : input.unsqueeze(0));
    const auto b = bias.has_value() && bias->defined() ? bias->contiguous() : at::Tensor();
    y = at::empty({s.N, s.O, s.out_h, s.out_w}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
    if (!aligned(x) || !aligned(b) || !aligned(y)) {
      r = Refusal::kAlignment;
    } else if (groups > 1) {
      grouped::forward(x, weight, b, y, g, groups);
    } else if (stem_path(input, g, groups, Pass::kForward)) {
      stem::forward(x, weight, b, y, g);
    } else {
      const auto wt = nhwc(weight);
      r = aligned(wt) ? implicit_gemm::forward(x, wt, b, y, g) : Refusal::kAlignment;
    }
  }
  log_choice(Pass::kForward, r, g, groups, input);
  if (r != Refusal::kNone) return {};
  return like_input(y, input);
}

// Events that fan the weight gradient's streams out and back in, kept per thread and device: creating and
// destroying nine events a call cost the host as much as the launches. Per thread, so concurrent callers never
// share one; destroyed when the thread exits, so threads that come and go leak no events. (The main thread's
// are destroyed before static objects and atexit handlers, CUDA's teardown among them.)
at::cuda::CUDAEvent* fan_events(int device) {
  thread_local std::array<std::array<at::cuda::CUDAEvent, kMaxWeightGradSplits + 1>, C10_COMPILE_TIME_MAX_GPUS>
      events;
  return events.at(device).data();
}

// The weight gradient, one launch per chunk of the batch on its own stream: CUTLASS's SM90 convolutions have no
// split-K, and a launch may have too few output tiles for the GPU's SMs (9 for 64 -> 64 channels 3x3 in 64x64
// tiles). Each chunk writes float32 partial sums; their sum is rounded once.
Refusal implicit_weight_grad(const at::Tensor& gout, const at::Tensor& x, const implicit_gemm::Geometry& g,
                             const at::Tensor& weight, at::Tensor* grad_weight) {
  const auto plan = implicit_gemm::plan_weight_grad(
      g, at::cuda::getDeviceProperties(x.get_device())->multiProcessorCount, kMaxWeightGradSplits);
  const int64_t chunk = (g.N + plan.splits - 1) / plan.splits;  // plan.splits <= g.N
  const int64_t splits = (g.N + chunk - 1) / chunk;
  auto partial = at::empty({splits, g.K, g.R, g.S, g.C}, x.options().dtype(at::kFloat));
  // Chunks are whole images of the dense NPQK / NHWC operands: byte offsets, no tensor views.
  const auto* gout_p = static_cast<const char*>(gout.const_data_ptr());
  const auto* x_p = static_cast<const char*>(x.const_data_ptr());
  const int64_t gout_image = g.P * g.Q * g.K * gout.element_size(), x_image = g.H * g.W * g.C * x.element_size();
  const int64_t filter = g.K * g.R * g.S * g.C;
  const auto current = at::cuda::getCurrentCUDAStream();
  at::cuda::CUDAEvent* events = fan_events(x.get_device());  // [0]: the work before; [1 + i]: chunk i done
  if (splits > 1) events[0].record(current);
  Refusal r = Refusal::kNone;
  for (int64_t i = 0; i < splits && r == Refusal::kNone; ++i) {
    const int64_t n0 = i * chunk;
    auto gi = g;
    gi.N = std::min(chunk, g.N - n0);
    // One launch runs on the current stream itself; more fan out to pool streams that wait for the work
    // before them, and the current stream waits for all of them (no host synchronisation).
    const auto stream = splits == 1 ? current : at::cuda::getStreamFromPool(false, x.get_device());
    if (splits > 1) events[0].block(stream);
    const c10::cuda::CUDAStreamGuard on(stream);
    r = implicit_gemm::weight_grad(gout_p + n0 * gout_image, x_p + n0 * x_image,
                                   partial.mutable_data_ptr<float>() + i * filter, gi, plan.tile, x);
    if (splits > 1) events[1 + i].record(stream);
  }
  if (splits > 1) {
    for (int64_t i = 0; i < splits; ++i) events[1 + i].block(current);
  }
  if (r != Refusal::kNone) return r;
  // Summed in float32, rounded once, in weight's format as PyTorch's weight gradient is: one kernel where ATen
  // took three (sum, rounding, layout), two launches less of host time on a call that is host-bound.
  *grad_weight = sum_weight_partials(partial, weight, PartialLayout::kKRSC);
  return Refusal::kNone;
}

// The unit-stride input gradient as a forward convolution: grad_out (N, K, P, Q) with the filter flipped in
// both spatial dimensions and its channel dimensions swapped, padded by dilation * (kernel - 1) - padding,
// gives grad_input (N, C, H, W). For TF32: WGMMA reads TF32 operands only K-major, which the KRSC filter of
// CUTLASS's input-gradient kernel is not; the flipped (C, R, S, K) filter is, for the forward kernel.
Refusal input_grad_as_forward(const at::Tensor& gout, const at::Tensor& weight, const at::Tensor& grad_input,
                              const implicit_gemm::Geometry& g) {
  const auto flipped = nhwc(weight.flip({2, 3}).transpose(0, 1));
  const implicit_gemm::Geometry t{g.N, g.P, g.Q, g.K, g.C, g.R, g.S, g.H, g.W,
                                  g.dil_h * (g.R - 1) - g.pad_h, g.dil_w * (g.S - 1) - g.pad_w, 1, 1,
                                  g.dil_h, g.dil_w};
  return aligned(flipped) ? implicit_gemm::forward(gout, flipped, at::Tensor(), grad_input, t) : Refusal::kAlignment;
}

// The fast path's gradients output_mask asks for, each an undefined tensor where the fast path does not take it.
std::pair<at::Tensor, at::Tensor> fast_grads(const at::Tensor& grad_out, const at::Tensor& input,
                                             const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                                             at::IntArrayRef dilation, int64_t groups,
                                             std::array<bool, 3> output_mask) {
  fold::Window w{};
  const auto s =
      conv::check<int64_t>("conv2d_backward", false, input, weight, std::nullopt, stride, padding, dilation, groups, &w);
  conv::check_grad_out("conv2d_backward", grad_out, input, s);
  const auto g = geometry(s, w);
  const Refusal r_in = output_mask[0] ? fast_path(input, g, groups, Pass::kInputGrad,
                                                    at::globalContext().allowTF32CuBLAS())
                                      : Refusal::kForced;
  const Refusal r_w = output_mask[1] ? fast_path(input, g, groups, Pass::kWeightGrad,
                                                    at::globalContext().allowTF32CuBLAS())
                                      : Refusal::kForced;
  if (r_in != Refusal::kNone && r_w != Refusal::kNone) {
    if (output_mask[0]) log_choice(Pass::kInputGrad, r_in, g, groups, input);
    if (output_mask[1]) log_choice(Pass::kWeightGrad, r_w, g, groups, input);
    return {};
  }
  const auto gout = nhwc(s.batched ? grad_out : grad_out.unsqueeze(0));
  at::Tensor grad_input, grad_weight;
  if (output_mask[0]) {
    Refusal r = r_in;
    if (r == Refusal::kNone) {
      grad_input = at::empty({s.N, s.C, s.H, s.W}, gout.options().memory_format(at::MemoryFormat::ChannelsLast));
      if (!aligned(gout) || !aligned(grad_input)) {
        r = Refusal::kAlignment;
      } else if (groups > 1) {
        grouped::input_grad(gout, weight, grad_input, g, groups);
      } else if (stem_path(input, g, groups, Pass::kInputGrad)) {
        stem::input_grad(gout, weight, grad_input, g);
      } else if (input.scalar_type() == at::kFloat) {
        r = input_grad_as_forward(gout, weight, grad_input, g);
      } else {
        const auto wt = nhwc(weight);
        r = aligned(wt) ? implicit_gemm::input_grad(gout, wt, grad_input, g) : Refusal::kAlignment;
      }
      grad_input = r == Refusal::kNone ? like_input(grad_input, input) : at::Tensor();
    }
    log_choice(Pass::kInputGrad, r, g, groups, input);
  }
  if (output_mask[1]) {
    Refusal r = r_w;
    if (r == Refusal::kNone) {
      const auto x = nhwc(s.batched ? input : input.unsqueeze(0));
      if (!aligned(gout) || !aligned(x)) {
        r = Refusal::kAlignment;
      } else if (groups > 1) {
        grad_weight = grouped::weight_grad(gout, x, weight, g, groups);
      } else if (stem_path(input, g, groups, Pass::kWeightGrad)) {
        grad_weight = stem::weight_grad(gout, x, weight, g);
      } else if (tf32_weight_grad_path(input, Pass::kWeightGrad)) {
        grad_weight = sum_weight_partials(tf32::weight_grad_partials(gout, x, g), weight);
      } else if (half_weight_grad_path(input, g, groups, Pass::kWeightGrad)) {
        grad_weight = sum_weight_partials(half_wgrad::weight_grad_partials(gout, x, g), weight);
      } else {
        r = implicit_weight_grad(gout, x, g, weight, &grad_weight);
      }
    }
    log_choice(Pass::kWeightGrad, r, g, groups, input);
  }
  return {grad_input, grad_weight};
}

} // namespace

at::Tensor conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  conv::check_devices("conv2d", input, weight, bias);
  const KernelGuard guard(input.device());
  if (auto y = fast_forward(input, weight, bias, stride, padding, dilation, groups); y.defined()) return y;
  return conv::gemm_forward(kBackend, input, weight, bias, stride, padding, dilation, groups);
}

conv::Grads conv2d_backward(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                            int64_t groups, std::array<bool, 3> output_mask) {
  conv::check_devices("conv2d_backward", input, weight, std::nullopt, grad_out);
  const KernelGuard guard(input.device());
  auto [grad_input, grad_weight] =
      fast_grads(grad_out, input, weight, stride, padding, dilation, groups, output_mask);
  // The explicit path computes what is left (and the bias gradient).
  auto rest = output_mask;
  rest[0] = rest[0] && !grad_input.defined();
  rest[1] = rest[1] && !grad_weight.defined();
  if (!rest[0] && !rest[1] && (grad_input.defined() || grad_weight.defined())) {
    // Only the bias gradient left: not through the explicit path, whose set-up makes an NCHW copy of input.
    const auto gout = input.dim() == 4 ? grad_out : grad_out.unsqueeze(0);
    return {grad_input, grad_weight, output_mask[2] ? gout.sum({0, 2, 3}) : at::Tensor()};
  }
  auto grads = conv::gemm_backward(kBackend, grad_out, input, weight, stride, padding, dilation, groups, rest);
  if (grad_input.defined()) std::get<0>(grads) = grad_input;
  if (grad_weight.defined()) std::get<1>(grads) = grad_weight;
  return grads;
}

} // namespace customops::cuda
