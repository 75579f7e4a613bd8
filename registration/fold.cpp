// Kernels of the fold family (im2col, col2im and their backward ops) for every
// dispatch key, and their autograd. Both ops are linear, and each one's
// gradient is the other, so im2col and col2im_backward share kernels and
// autograd, as do col2im and im2col_backward.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include "kernels/fold.h"
#include "ops/src/fold_ops.h"
#include "registration/autocast.h"

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
void save_window(AutogradContext* ctx, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                 at::IntArrayRef s) {
  ctx->saved_data["k"] = k.vec();
  ctx->saved_data["d"] = d.vec();
  ctx->saved_data["p"] = p.vec();
  ctx->saved_data["s"] = s.vec();
}

// im2col (also the kernel of col2im_backward); its gradient folds.
class UnfoldFunction : public torch::autograd::Function<UnfoldFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d,
                            at::IntArrayRef p, at::IntArrayRef s) {
    save_window(ctx, k, d, p, s);
    ctx->saved_data["h"] = input.sym_size(-2);
    ctx->saved_data["w"] = input.sym_size(-1);
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::im2col_op().call(input, k, d, p, s);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& sd = ctx->saved_data;
    const std::vector<c10::SymInt> size{sd["h"].toSymInt(), sd["w"].toSymInt()};
    return {detail::im2col_backward_op().call(grads[0], size, sd["k"].toIntVector(), sd["d"].toIntVector(),
                                              sd["p"].toIntVector(), sd["s"].toIntVector()),
            {}, {}, {}, {}};
  }
};

// col2im (also the kernel of im2col_backward); its gradient unfolds.
class FoldFunction : public torch::autograd::Function<FoldFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, c10::SymIntArrayRef size,
                            at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
    save_window(ctx, k, d, p, s);
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::col2im_op().call(input, size, k, d, p, s);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto& sd = ctx->saved_data;
    return {detail::col2im_backward_op().call(grads[0], sd["k"].toIntVector(), sd["d"].toIntVector(),
                                              sd["p"].toIntVector(), sd["s"].toIntVector()),
            {}, {}, {}, {}, {}};
  }
};

at::Tensor unfold_autograd(const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                           at::IntArrayRef s) {
  return UnfoldFunction::apply(input, k, d, p, s);
}

at::Tensor fold_autograd(const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k, at::IntArrayRef d,
                         at::IntArrayRef p, at::IntArrayRef s) {
  return FoldFunction::apply(input, size, k, d, p, s);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("im2col", CUSTOMOPS_CPU_KERNEL(im2col));
  m.impl("col2im_backward", CUSTOMOPS_CPU_KERNEL(im2col));
  m.impl("col2im", CUSTOMOPS_CPU_KERNEL(col2im));
  m.impl("im2col_backward", CUSTOMOPS_CPU_KERNEL(col2im));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("im2col", &customops::cuda::im2col);
  m.impl("col2im_backward", &customops::cuda::im2col);
  m.impl("col2im", &customops::cuda::col2im);
  m.impl("im2col_backward", &customops::cuda::col2im);
}
#endif

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("im2col", &customops::meta::im2col);
  m.impl("col2im_backward", &customops::meta::im2col);
  m.impl("col2im", &customops::meta::col2im);
  m.impl("im2col_backward", &customops::meta::col2im);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("im2col", &customops::unfold_autograd);
  m.impl("col2im_backward", &customops::unfold_autograd);
  m.impl("col2im", &customops::fold_autograd);
  m.impl("im2col_backward", &customops::fold_autograd);
}

// Autocast: im2col and col2im run in their input's dtype, as F.unfold and F.fold do.
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("im2col", "im2col_backward", "col2im", "col2im_backward")
