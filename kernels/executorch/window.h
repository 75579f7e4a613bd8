// The window arguments (kernel size, dilation, padding, stride) of customops' ExecuTorch kernels that slide one:
// im2col, col2im, depthwise_conv2d. Checked as kernels/fold.h checks them for libtorch's kernels.
#pragma once

#include "kernels/core/fold.h"
#include "kernels/executorch/common.h"

namespace customops::executorch_kernels {

using IntList = ::executorch::aten::ArrayRef<int64_t>;
using ::executorch::aten::SizesType;

// The window, or false (the kernel failed, logged) where an argument is not a pair of valid values.
inline bool window(KernelRuntimeContext& ctx, const char* op, IntList kernel_size, IntList dilation,
                   IntList padding, IntList stride, fold::Window* w) {
  const IntList lists[4] = {kernel_size, dilation, padding, stride};
  const char* names[4] = {"kernel_size", "dilation", "padding", "stride"};
  for (int a = 0; a < 4; ++a) {
    const int64_t least = a == 2 ? 0 : 1;
    if (lists[a].size() != 2 || lists[a][0] < least || lists[a][1] < least) {
      ET_LOG(Error, "customops::%s: expected %s to be 2 %s values", op, names[a],
             least ? "positive" : "non-negative");
      ctx.fail(::executorch::runtime::Error::InvalidArgument);
      return false;
    }
  }
  *w = {kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0], padding[1], stride[0], stride[1]};
  return true;
}

// Whether the (dilated) kernel fits the padded size along an axis.
inline bool fits(int64_t size, int64_t k, int64_t d, int64_t p) {
  return size + 2 * p - d * (k - 1) - 1 >= 0;
}

} // namespace customops::executorch_kernels
