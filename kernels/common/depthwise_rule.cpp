// The rule that picks, per pass of a CUDA depthwise convolution, customops' kernels or PyTorch's (cuDNN or
// its native depthwise kernels), where no timing decides (kernels/common/backend_choice.h). It was read off
// `python -m customops.benchmark.depthwise_choice` (every depthwise shape of the model zoo, batch 128, each
// pass of both implementations timed back to back; docs/performance/depthwise_choice.md has the table, the
// command and the machine; cudnn.benchmark off, PyTorch's default). Shapes no measurement covers (a channel
// multiplier, dilation, float64, 16-bit NCHW, float32 channels_last) run customops' kernels, and so do the
// 16-bit channels_last ones while cuDNN is off (torch.backends.cudnn.enabled = False): the rule measured
// cuDNN's NHWC kernels there, and PyTorch's fallback without cuDNN copies to NCHW.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <sstream>

#include "kernels/conv2d.h"

namespace customops::conv {
namespace {

using backend::Impl;

bool is_half(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16;
}

// The rule's features: channels, input plane height, largest kernel side, stride (the zoo's are 1 or 2).
struct Features {
  int64_t C, H, k, s;
  bool band;    // a 1xk or kx1 kernel
  bool period;  // the input gradient by stride periods applies (conv::period_dgrad_applies)
};

Features features(const DepthwiseCase& c) {
  return {c.C, c.H, std::max(c.kh, c.kw), std::max(c.sh, c.sw), c.kh != c.kw,
          period_dgrad_applies(c.kh, c.kw, c.sh, c.sw, c.dh, c.dw, c.m, c.channels_last,
                               c.C * int64_t(c10::elementSize(c.dtype)))};
}

// 16-bit channels_last against cuDNN's NHWC kernels. A pass goes to cuDNN only where it saves more GPU time than
// the call costs the host beyond customops' own launch, so that a host-bound step (batch 128 at 224 on an H100) is
// not made slower by it. Timed behind a GPU sleep on an H100 (bf16 autocast, a layer's forward + backward;
// docs/performance/depthwise.md), a layer whose forward was routed took the host a median of 21 us more than the
// same layer on customops' kernels alone, one whose weight gradient was routed 14 us (5 us where nothing was: the
// timing's bias). Fitted to the zoo's layers (`python -m customops.benchmark.depthwise_choice --configs
// bf16-channels_last`, H100, batch 128): a forward where cuDNN ran it about 25 us faster or more, a weight gradient
// 15 us; e.g. the 1152x7x7 5x5 forward (50 us customops', 35 cuDNN's) stays with customops, its weight gradient
// (76 / 48) goes to cuDNN. Only square windows were faster in cuDNN.
Impl half_channels_last(DepthwisePass pass, const Features& f) {
  bool theirs = false;
  switch (pass) {
    case DepthwisePass::forward:
      // Stride 1: cuDNN saved at most 17 us. Stride 2: its 3x3 on 112x112 planes of few channels 18-61 us, its 5x5
      // on 28x28 planes 26-38 us and on 14x14 planes of 672 channels 57-65 us (below 512 channels 17-25 us, on
      // 56x56 planes 5-31 us), its 7x7 and 11x11 on 14x14 planes 34-94 us (its 9x9 there lost 11).
      theirs = f.s > 1 && ((f.k == 3 && f.H >= 112 && f.C <= 48) ||
                           (f.k == 5 && ((f.H > 14 && f.H < 56) || (f.H <= 14 && f.C >= 512))) ||
                           (f.k >= 7 && f.k != 9 && f.H <= 14));
      break;
    case DepthwisePass::input_grad:
      // cuDNN ran no zoo layer's input gradient 10 us faster, except one of 10 channels (not whole 16-byte words).
      break;
    case DepthwisePass::weight_grad:
      if (f.s > 1) {
        // 5x5 and 7x7 on planes of 28x28 and more: 24-123 us saved (1.4-2.2x); on 14x14 planes customops' kernels
        // are 4-8x faster.
        theirs = f.k >= 5 && f.k <= 7 && f.H >= 28;
      } else {
        // 5x5 on 28x28 planes of 96 channels and more (24-35 us), on 14x14 planes of 640 and more (23 us), on 7x7
        // planes of 768 and more (25-28 us); 7x7 on 28x28 planes (34 us). Elsewhere cuDNN saved at most 16 us.
        theirs = (f.k == 5 && ((f.H >= 28 && f.C >= 96) || (f.H >= 14 && f.C >= 640) || f.C >= 768)) ||
                 (f.k == 7 && f.H >= 28 && f.H < 56);
      }
      break;
  }
  return theirs && !f.band ? Impl::pytorch : Impl::customops;
}

// float32 NCHW against PyTorch's native depthwise kernels: 0.555 of PyTorch's time over the zoo, the faster
// of both 0.554.
Impl float_nchw(DepthwisePass pass, const Features& f) {
  bool ours = true;
  switch (pass) {
    case DepthwisePass::forward:
      if (f.C <= 8) {
        ours = true;
      } else if (f.H <= 7) {
        ours = f.k <= 5;
      } else {
        ours = f.s <= 1;
      }
      break;
    case DepthwisePass::input_grad:
      // At stride 2 PyTorch's kernel moved its bytes at 2-8% of the copy bandwidth over the zoo's strided shapes,
      // the kernel by stride periods (period_dgrad.cu) at 25-84% (0.07-0.22 of PyTorch's time).
      ours = f.C <= 10 || f.s <= 1 || f.period;
      break;
    case DepthwisePass::weight_grad:
      if (f.C <= 10) {
        ours = true;
      } else if (f.s <= 1) {
        ours = !f.band;
      } else {
        ours = f.k <= 5;
      }
      break;
  }
  return ours ? Impl::customops : Impl::pytorch;
}

}  // namespace

DepthwiseCase depthwise_case(DepthwisePass pass, const DepthwisePlan& p, bool bias) {
  return {pass, p.s.N, p.s.C, p.s.H, p.s.W, p.m, p.w.kh, p.w.kw, p.w.sh, p.w.sw, p.w.dh, p.w.dw, p.w.ph,
          p.w.pw, p.s.out_h, p.s.out_w, p.x.scalar_type(), p.channels_last, bias};
}

bool depthwise_has_choice(const DepthwiseCase& c) {
  return c.N > 0 && c.out_h > 0 && c.out_w > 0;
}

// Below this many input elements a pass takes a few microseconds of GPU time whichever kernel runs it, and the
// host's time is what counts: a backward split between both libraries makes two calls (on an H200, a 2x32x8x8
// bf16 channels_last layer's autocast forward + backward took 246 us of host time with cuDNN's input gradient,
// 210 with customops' kernels alone, 215 with nn.Conv2d). The zoo's smallest layer has 6.3M elements.
constexpr int64_t kHostBoundElements = int64_t(1) << 17;

Impl depthwise_rule(const DepthwiseCase& c) {
  if (!depthwise_has_choice(c) || c.m != 1 || c.dh != 1 || c.dw != 1) return Impl::customops;
  if (c.N * c.C * c.H * c.W < kHostBoundElements) return Impl::customops;
  if (is_half(c.dtype) && c.channels_last) {
    return at::globalContext().userEnabledCuDNN() ? half_channels_last(c.pass, features(c)) : Impl::customops;
  }
  if (c.dtype == at::kFloat && !c.channels_last) return float_nchw(c.pass, features(c));
  return Impl::customops;  // not measured: 16-bit NCHW, float32 channels_last
}

std::string depthwise_key(const DepthwiseCase& c, int device) {
  std::ostringstream key;
  key << "depthwise_conv2d/" << pass_name(c.pass) << "/dev" << device << '/' << c.dtype << (c.channels_last ? "/cl/" : "/nchw/")
      << c.N << 'x' << c.C << 'x' << c.H << 'x' << c.W << "/k" << c.kh << 'x' << c.kw << "/s" << c.sh << 'x' << c.sw
      << "/p" << c.ph << 'x' << c.pw << "/d" << c.dh << 'x' << c.dw << "/o" << c.out_h << 'x' << c.out_w << (c.bias ? "/bias" : "");
  return key.str();
}

const char* pass_name(DepthwisePass pass) {
  switch (pass) {
    case DepthwisePass::forward: return "forward";
    case DepthwisePass::input_grad: return "input_grad";
    default: return "weight_grad";
  }
}

}  // namespace customops::conv
