// causal_conv1d.out for ExecuTorch's runtime: the checks of kernels/causal_conv1d.h on ExecuTorch's tensors, then
// the filter of kernels/core/causal_conv1d.h, as libtorch's CPU kernel runs it.
#include "kernels/core/causal_conv1d.h"
#include "kernels/executorch/common.h"

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <optional>
#include <vector>

namespace customops::executorch_kernels {
namespace {

using causal_conv1d_impl::kMaxWidth;

Tensor& causal_conv1d_out(KernelRuntimeContext& ctx, const Tensor& x, const Tensor& weight,
                          const std::optional<Tensor>& bias, Tensor& out) {
  CUSTOMOPS_ET_CHECK(ctx, floating(x) && x.dim() == 3, out, "causal_conv1d",
                     "expected floating x of shape (B, C, L), got %zu dimensions", size_t(x.dim()));
  const int64_t B = x.size(0), C = x.size(1), L = x.size(2);
  CUSTOMOPS_ET_CHECK(ctx, weight.dim() == 2 && weight.size(0) == C, out, "causal_conv1d",
                     "expected weight of shape (C, K) with C = x.size(1) = %zd", ssize_t(C));
  const int64_t K = weight.size(1);
  CUSTOMOPS_ET_CHECK(ctx, K >= 1 && K <= kMaxWidth, out, "causal_conv1d",
                     "expected a filter width K = weight.size(1) between 1 and %zd, got %zd", ssize_t(kMaxWidth),
                     ssize_t(K));
  const Tensor* b = bias.has_value() ? &bias.value() : nullptr;
  CUSTOMOPS_ET_CHECK(ctx, !b || (b->dim() == 1 && b->size(0) == C), out, "causal_conv1d",
                     "expected bias of shape (C,) with C = x.size(1) = %zd", ssize_t(C));
  CUSTOMOPS_ET_CHECK(ctx, weight.scalar_type() == x.scalar_type() && (!b || b->scalar_type() == x.scalar_type()) &&
                              out.scalar_type() == x.scalar_type(),
                     out, "causal_conv1d", "expected weight, bias and out of x's dtype");
  CUSTOMOPS_ET_CHECK(ctx, contiguous(x) && contiguous(weight) && (!b || contiguous(*b)) && contiguous(out), out,
                     "causal_conv1d", "expected x, weight, bias and out in the default dim order");
  CUSTOMOPS_ET_CHECK(ctx, ::executorch::runtime::resize_tensor(out, x.sizes()) == ::executorch::runtime::Error::Ok,
                     out, "causal_conv1d", "could not resize out to x's shape");
  if (out.numel() == 0) return out;
  ET_SWITCH_FLOATHBF16_TYPES(x.scalar_type(), ctx, "causal_conv1d.out", scalar_t, [&] {
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    const scalar_t* w = weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = b ? b->const_data_ptr<scalar_t>() : nullptr;
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    ::executorch::extension::parallel_for(0, B * C, grain(L * K), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t<scalar_t>> row(L + K - 1), acc(L), taps(K);
      causal_conv1d_impl::filter_rows<false>(in, w, bp, o, begin, end, C, L, K, row.data(), acc.data(), taps.data());
    });
  });
  return out;
}

} // namespace
} // namespace customops::executorch_kernels

EXECUTORCH_LIBRARY(customops, "causal_conv1d.out", customops::executorch_kernels::causal_conv1d_out);
