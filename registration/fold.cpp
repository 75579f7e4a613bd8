// Kernels of the fold family (im2col, col2im and their backward ops) for every
// dispatch key, and their autograd. Both ops are linear, and each one's
// gradient is the other, so im2col and col2im_backward share kernels and
// autograd, as do col2im and im2col_backward.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <customops/fold.h>

#include "kernels/fold.h"
#include "registration/autocast.h"
#include "registration/out_variant.h"

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

// The ops' and arguments' names, for messages.
constexpr char kIm2col[] = "im2col", kCol2im[] = "col2im", kIm2colBackward[] = "im2col_backward",
               kCol2imBackward[] = "col2im_backward", kInput[] = "input", kGradOut[] = "grad_out",
               kOutputSize[] = "output_size", kInputSize[] = "input_size";

// The autograd kernels serve two ops each, and call im2col and col2im below
// autograd whichever was called: `op`, `arg` and `size_arg` name the op called
// and its arguments, and its arguments are checked here under those names
// (None among them too, which autograd's bookkeeping would fail on with a
// message naming nothing). Symbolic sizes pass; the kernels check them.
template <const char* op, const char* arg>
at::Tensor unfold_autograd(const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                           at::IntArrayRef s) {
  checks::defined(op, arg, input);
  fold::im2col_sizes<c10::SymInt>(op, arg, input, fold::window(op, k, d, p, s));
  return UnfoldFunction::apply(input, k, d, p, s);
}

template <const char* op, const char* arg, const char* size_arg>
at::Tensor fold_autograd(const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k, at::IntArrayRef d,
                         at::IntArrayRef p, at::IntArrayRef s) {
  checks::defined(op, arg, input);
  fold::col2im_sizes<c10::SymInt>(op, arg, size_arg, input, size, fold::window(op, k, d, p, s));
  return FoldFunction::apply(input, size, k, d, p, s);
}

// Each backend's kernels are those of im2col and col2im, whose messages name
// im2col's and col2im's arguments: the entry points below check the arguments
// under the names of the op called first. The fold entry points take the size
// as SymInts, as the schema does: a size below -2^62 is a SymInt that the
// dispatcher cannot hand to a kernel taking int64_t (its message names no
// argument), so it is checked here, and only then made concrete.

using UnfoldKernel = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                    at::IntArrayRef);
using FoldKernel = at::Tensor (*)(const at::Tensor&, at::IntArrayRef, at::IntArrayRef, at::IntArrayRef,
                                  at::IntArrayRef, at::IntArrayRef);

template <const char* op, const char* arg>
at::Tensor unfold_checked(UnfoldKernel kernel, const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d,
                          at::IntArrayRef p, at::IntArrayRef s) {
  fold::im2col_sizes<int64_t>(op, arg, input, fold::window(op, k, d, p, s));
  return kernel(input, k, d, p, s);
}

template <const char* op, const char* arg, const char* size_arg>
at::Tensor fold_checked(FoldKernel kernel, const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k,
                        at::IntArrayRef d, at::IntArrayRef p, at::IntArrayRef s) {
  fold::col2im_sizes<c10::SymInt>(op, arg, size_arg, input, size, fold::window(op, k, d, p, s));
  return kernel(input, C10_AS_INTARRAYREF_SLOW(size), k, d, p, s);
}

// The best CPU build's kernels, picked once.
UnfoldKernel cpu_im2col() {
  static const UnfoldKernel kernel = CUSTOMOPS_CPU_KERNEL(im2col);
  return kernel;
}
FoldKernel cpu_col2im() {
  static const FoldKernel kernel = CUSTOMOPS_CPU_KERNEL(col2im);
  return kernel;
}

template <const char* op, const char* arg>
at::Tensor unfold_cpu(const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                      at::IntArrayRef s) {
  return unfold_checked<op, arg>(cpu_im2col(), input, k, d, p, s);
}

template <const char* op, const char* arg, const char* size_arg>
at::Tensor fold_cpu(const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k, at::IntArrayRef d,
                    at::IntArrayRef p, at::IntArrayRef s) {
  return fold_checked<op, arg, size_arg>(cpu_col2im(), input, size, k, d, p, s);
}

#if defined(CUSTOMOPS_WITH_CUDA)
template <const char* op, const char* arg>
at::Tensor unfold_cuda(const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                       at::IntArrayRef s) {
  return unfold_checked<op, arg>(&cuda::im2col, input, k, d, p, s);
}

template <const char* op, const char* arg, const char* size_arg>
at::Tensor fold_cuda(const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k, at::IntArrayRef d,
                     at::IntArrayRef p, at::IntArrayRef s) {
  return fold_checked<op, arg, size_arg>(&cuda::col2im, input, size, k, d, p, s);
}
#endif

template <const char* op, const char* arg>
at::Tensor unfold_meta(const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                       at::IntArrayRef s) {
  fold::im2col_sizes<c10::SymInt>(op, arg, input, fold::window(op, k, d, p, s));
  return meta::im2col(input, k, d, p, s);
}

template <const char* op, const char* arg, const char* size_arg>
at::Tensor fold_meta(const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k, at::IntArrayRef d,
                     at::IntArrayRef p, at::IntArrayRef s) {
  fold::col2im_sizes<c10::SymInt>(op, arg, size_arg, input, size, fold::window(op, k, d, p, s));
  return meta::col2im(input, size, k, d, p, s);
}

at::Tensor& im2col_out(const at::Tensor& input, at::IntArrayRef k, at::IntArrayRef d, at::IntArrayRef p,
                       at::IntArrayRef s, at::Tensor& out) {
  return out_variant::into("im2col.out", detail::im2col_op().call(input, k, d, p, s), out);
}

at::Tensor& col2im_out(const at::Tensor& input, c10::SymIntArrayRef size, at::IntArrayRef k, at::IntArrayRef d,
                       at::IntArrayRef p, at::IntArrayRef s, at::Tensor& out) {
  return out_variant::into("col2im.out", detail::col2im_op().call(input, size, k, d, p, s), out);
}

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  using namespace customops;
  m.impl("im2col", &unfold_cpu<kIm2col, kInput>);
  m.impl("col2im_backward", &unfold_cpu<kCol2imBackward, kGradOut>);
  m.impl("col2im", &fold_cpu<kCol2im, kInput, kOutputSize>);
  m.impl("im2col_backward", &fold_cpu<kIm2colBackward, kGradOut, kInputSize>);
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  using namespace customops;
  m.impl("im2col", &unfold_cuda<kIm2col, kInput>);
  m.impl("col2im_backward", &unfold_cuda<kCol2imBackward, kGradOut>);
  m.impl("col2im", &fold_cuda<kCol2im, kInput, kOutputSize>);
  m.impl("im2col_backward", &fold_cuda<kIm2colBackward, kGradOut, kInputSize>);
}
#endif

TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {
  m.impl("im2col.out", TORCH_FN(customops::im2col_out));
  m.impl("col2im.out", TORCH_FN(customops::col2im_out));
}

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  using namespace customops;
  m.impl("im2col", &unfold_meta<kIm2col, kInput>);
  m.impl("col2im_backward", &unfold_meta<kCol2imBackward, kGradOut>);
  m.impl("col2im", &fold_meta<kCol2im, kInput, kOutputSize>);
  m.impl("im2col_backward", &fold_meta<kIm2colBackward, kGradOut, kInputSize>);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  using namespace customops;
  m.impl("im2col", &unfold_autograd<kIm2col, kInput>);
  m.impl("col2im_backward", &unfold_autograd<kCol2imBackward, kGradOut>);
  m.impl("col2im", &fold_autograd<kCol2im, kInput, kOutputSize>);
  m.impl("im2col_backward", &fold_autograd<kIm2colBackward, kGradOut, kInputSize>);
}

// Autocast: im2col and col2im run in their input's dtype, as F.unfold and F.fold do.
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("im2col", "im2col_backward", "col2im", "col2im_backward")
