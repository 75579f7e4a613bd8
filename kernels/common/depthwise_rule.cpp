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

// 16-bit channels_last against cuDNN's NHWC kernels. Per pass a depth-3 decision tree fitted to the
// measurements (weighted by how often each layer occurs in the zoo); over the zoo it costs 0.670 of
// PyTorch's time where always the faster would cost 0.663.
Impl half_channels_last(DepthwisePass pass, const Features& f) {
  bool ours = true;
  switch (pass) {
    case DepthwisePass::forward:
      if (f.k <= 3) {
        ours = f.s <= 1 ? f.C <= 32 : f.C > 48;
      } else if (f.H <= 7) {
        ours = f.k > 7;
      } else {
        ours = f.s <= 1;
      }
      break;
    case DepthwisePass::input_grad:
      if (f.s > 1) {
        // The row gather kernel (nhwc.cu: row_input_grad_kernel), which takes whole 16-byte words of channels,
        // replaced the tree's branch here: over the zoo's 40 strided shapes 0.59 of cuDNN's time (geomean; 0.46-0.82
        // where C % 8 == 0, 0.97-1.01 on two 14x14 and 28x28 planes), timed with the policy forced both ways. The
        // kernel by stride periods (period_dgrad.cu) took the 3x3 ones (0.38-0.81, 0.59 of the row kernel's time
        // on 96x112x112) and 5x5 ones on channels that are not whole words (36: 0.53 of cuDNN's).
        ours = f.period || f.C % 8 == 0 || f.k > 5;
      } else if (f.H <= 14) {
        ours = f.C > 144 || f.k > 5;
      }
      break;
    case DepthwisePass::weight_grad:
      if (f.k <= 3) {
        ours = f.C <= 72 || f.s > 1;
      } else if (f.s <= 1) {
        ours = f.k > 7;
      } else {
        ours = f.H <= 14;
      }
      break;
  }
  return ours ? Impl::customops : Impl::pytorch;
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
