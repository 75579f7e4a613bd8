// The rule that picks, per pass of a CUDA upsample_bilinear2d call, customops' kernels or PyTorch's, where no
// timing decides (kernels/common/backend_choice.h). It was read off `python -m customops.benchmark.
// upsample_choice` (resizes by 0.5, 1.75, 2 and 4 of planes from 7x7 to 224x224, 3 to 512 channels, three
// dtypes, both layouts, each pass of both implementations timed back to back; docs/performance/
// upsample_choice.md has the table, the command and the machine). customops' kernels win most calls, by
// 3-30x on NCHW ones; PyTorch's win where its kernels are of another design than ours:
// - the channels_last backward: PyTorch's scatters each output's gradient into its four taps, one thread per
//   element, which is faster than our gathering kernel for a downscale (each input has 1-2 readers, so our
//   kernel's search for them is all overhead) and, in float32, for upscales by less than 3 (its atomics on
//   32-bit words are cheap; ours reads each input's readers' weights twice);
// - the NCHW backward of a downscale to a small plane (both kernels are launch-bound there, ours spends a
//   thread per input element on few outputs) or of few channels, and float32 upscales of planes up to 8x8;
// - the channels_last forward of inputs with fewer than 8 channels (our kernel vectorises over channels).
#include <ATen/Context.h>

#include <limits>
#include <sstream>

#include "kernels/upsample.h"

namespace customops::upsample {
namespace {

using backend::Impl;

bool is_half(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16;
}

Impl forward_rule(const Case& c, bool downscale) {
  return c.channels_last && c.C < 8 && !downscale && c.N * c.in_h * c.in_w >= 65536 ? Impl::pytorch
                                                                                    : Impl::customops;
}

Impl backward_rule(const Case& c, bool downscale, int64_t in_plane, int64_t out_plane) {
  const bool wide = !is_half(c.dtype);
  const bool under_3x = out_plane < 9 * in_plane;  // an upscale by less than 3 along each axis
  if (c.channels_last) {
    if (downscale) return c.C >= 32 || (c.C >= 16 && in_plane >= 4096) ? Impl::pytorch : Impl::customops;
    return wide && c.C >= 8 && (under_3x || in_plane <= 256) ? Impl::pytorch : Impl::customops;
  }
  if (downscale) return (out_plane <= 256 && c.N * c.C >= 1024) || c.C < 8 ? Impl::pytorch : Impl::customops;
  return wide && in_plane <= 64 && under_3x ? Impl::pytorch : Impl::customops;
}

}  // namespace

bool has_choice(const Case& c) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  const int64_t in = c.N * c.C * c.in_h * c.in_w, out = c.N * c.C * c.out_h * c.out_w;
  if (c.mode == Mode::Asymmetric || in == 0 || out == 0 || in > kInt32Max || out > kInt32Max) return false;
  if (c.pass == Pass::forward) return true;
  // PyTorch's backward adds in the gradient's own dtype: in float16 and bfloat16 an input read by many outputs
  // (an upscale) loses bits with every addition, where ours sums in float.
  return !at::globalContext().deterministicAlgorithms() &&
         (!is_half(c.dtype) || (c.out_h <= c.in_h && c.out_w <= c.in_w));
}

Impl rule(const Case& c) {
  if (!has_choice(c)) return Impl::customops;
  const int64_t in_plane = c.in_h * c.in_w, out_plane = c.out_h * c.out_w;
  const bool downscale = out_plane < in_plane;
  return c.pass == Pass::forward ? forward_rule(c, downscale) : backward_rule(c, downscale, in_plane, out_plane);
}

std::string key(const Case& c, int device) {
  static const char* modes[] = {"half_pixel", "align_corners", "asymmetric"};
  std::ostringstream k;
  k << "upsample_bilinear2d/" << (c.pass == Pass::forward ? "forward" : "backward") << "/dev" << device << '/'
    << c.dtype << (c.channels_last ? "/cl/" : "/nchw/") << c.N << 'x' << c.C << 'x' << c.in_h << 'x' << c.in_w
    << "/o" << c.out_h << 'x' << c.out_w << '/' << modes[static_cast<int>(c.mode)];
  return k.str();
}

}  // namespace customops::upsample
