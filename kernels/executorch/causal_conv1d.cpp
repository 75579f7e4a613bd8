// causal_conv1d.out for ExecuTorch's runtime: the checks of kernels/causal_conv1d.h on ExecuTorch's tensors, then
// the filter of kernels/core/causal_conv1d.h, as libtorch's CPU kernel runs it.
#include "kernels/core/causal_conv1d.h"
#include "kernels/executorch/common.h"

#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>

#include <optional>
#include <string_view>
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

// The decoding step (causal_conv1d.update_out): conv_state, a mutable buffer of the program, updated in place as
// libtorch's CPU kernel updates it (kernels/core/causal_conv1d.h: update_row).
Tensor& causal_conv1d_update_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& conv_state, const Tensor& weight,
                                 const std::optional<Tensor>& bias,
                                 std::optional<::executorch::aten::string_view> activation,
                                 const std::optional<Tensor>& cache_seqlens,
                                 const std::optional<Tensor>& conv_state_indices, Tensor& out) {
  CUSTOMOPS_ET_CHECK(ctx, floating(x) && (x.dim() == 2 || x.dim() == 3), out, "causal_conv1d.update",
                     "expected floating x of shape (B, C) or (B, C, L), got %zu dimensions", size_t(x.dim()));
  const int64_t B = x.size(0), C = x.size(1), L = x.dim() == 3 ? x.size(2) : 1;
  CUSTOMOPS_ET_CHECK(ctx, weight.dim() == 2 && weight.size(0) == C, out, "causal_conv1d.update",
                     "expected weight of shape (C, K) with C = x.size(1) = %zd", ssize_t(C));
  const int64_t K = weight.size(1);
  CUSTOMOPS_ET_CHECK(ctx, K >= 1 && K <= kMaxWidth, out, "causal_conv1d.update",
                     "expected a filter width K = weight.size(1) between 1 and %zd, got %zd", ssize_t(kMaxWidth),
                     ssize_t(K));
  const Tensor* b = bias.has_value() ? &bias.value() : nullptr;
  CUSTOMOPS_ET_CHECK(ctx, !b || (b->dim() == 1 && b->size(0) == C), out, "causal_conv1d.update",
                     "expected bias of shape (C,) with C = x.size(1) = %zd", ssize_t(C));
  const Tensor* idx = conv_state_indices.has_value() ? &conv_state_indices.value() : nullptr;
  const Tensor* lens = cache_seqlens.has_value() ? &cache_seqlens.value() : nullptr;
  CUSTOMOPS_ET_CHECK(ctx, conv_state.dim() == 3 && conv_state.size(1) == C && conv_state.size(2) >= K - 1 &&
                              (idx || conv_state.size(0) == B),
                     out, "causal_conv1d.update",
                     "expected conv_state of shape (B, C, S) with B = x.size(0) = %zd (any rows with "
                     "conv_state_indices), C = %zd and S >= K-1 = %zd",
                     ssize_t(B), ssize_t(C), ssize_t(K - 1));
  const int64_t S = conv_state.size(2), rows = conv_state.size(0);
  CUSTOMOPS_ET_CHECK(ctx, weight.scalar_type() == x.scalar_type() && (!b || b->scalar_type() == x.scalar_type()) &&
                              conv_state.scalar_type() == x.scalar_type() && out.scalar_type() == x.scalar_type(),
                     out, "causal_conv1d.update", "expected weight, bias, conv_state and out of x's dtype");
  for (const Tensor* t : {lens, idx}) {
    CUSTOMOPS_ET_CHECK(ctx, !t || (t->scalar_type() == ScalarType::Int && t->dim() == 1 && t->size(0) == B), out,
                       "causal_conv1d.update",
                       "expected cache_seqlens and conv_state_indices of dtype int32 and shape (B,) = (%zd,)",
                       ssize_t(B));
  }
  CUSTOMOPS_ET_CHECK(ctx, !lens || S >= 1, out, "causal_conv1d.update",
                     "expected a conv_state of at least one step (S >= 1) with cache_seqlens");
  bool silu = false;
  if (activation.has_value()) {
    const std::string_view name(activation->data(), activation->size());
    CUSTOMOPS_ET_CHECK(ctx, name == "silu" || name == "swish", out, "causal_conv1d.update",
                       "expected activation None, \"silu\" or \"swish\"");
    silu = true;
  }
  CUSTOMOPS_ET_CHECK(ctx, contiguous(x) && contiguous(weight) && (!b || contiguous(*b)) && contiguous(conv_state) &&
                              (!lens || contiguous(*lens)) && (!idx || contiguous(*idx)) && contiguous(out),
                     out, "causal_conv1d.update", "expected every tensor in the default dim order");
  const int32_t* ip = idx ? idx->const_data_ptr<int32_t>() : nullptr;
  for (int64_t i = 0; ip && i < B; ++i) {
    CUSTOMOPS_ET_CHECK(ctx, ip[i] < rows, out, "causal_conv1d.update",
                       "conv_state_indices[%zd] = %d is out of range for a conv_state of %zd rows", ssize_t(i),
                       int(ip[i]), ssize_t(rows));
  }
  CUSTOMOPS_ET_CHECK(ctx, ::executorch::runtime::resize_tensor(out, x.sizes()) == ::executorch::runtime::Error::Ok,
                     out, "causal_conv1d.update", "could not resize out to x's shape");
  if (out.numel() == 0) return out;
  const int32_t* lp = lens ? lens->const_data_ptr<int32_t>() : nullptr;
  ET_SWITCH_FLOATHBF16_TYPES(x.scalar_type(), ctx, "causal_conv1d.update_out", scalar_t, [&] {
    using acc_t = opmath_t<scalar_t>;
    const scalar_t* in = x.const_data_ptr<scalar_t>();
    scalar_t* state = conv_state.mutable_data_ptr<scalar_t>();
    const scalar_t* w = weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = b ? b->const_data_ptr<scalar_t>() : nullptr;
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    ::executorch::extension::parallel_for(0, B * C, grain(L * K + S), [&](int64_t begin, int64_t end) {
      std::vector<acc_t> window(K - 1 + L);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t bi = r / C, c = r % C;
        const int64_t row = ip ? int64_t(ip[bi]) : bi;
        if (row < 0) {  // a padding row: zeros out, no state to touch
          std::fill(o + r * L, o + (r + 1) * L, scalar_t(0));
          continue;
        }
        causal_conv1d_impl::update_row(in + r * L, 1, state + (row * C + c) * S, 1, S, w + c * K,
                                       bp ? static_cast<acc_t>(bp[c]) : acc_t(0), silu, L, K, lp != nullptr,
                                       lp ? int64_t(lp[bi]) : 0, o + r * L, 1, window.data());
      }
    });
  });
  return out;
}

} // namespace
} // namespace customops::executorch_kernels

EXECUTORCH_LIBRARY(customops, "causal_conv1d.out", customops::executorch_kernels::causal_conv1d_out);
EXECUTORCH_LIBRARY(customops, "causal_conv1d.update_out", customops::executorch_kernels::causal_conv1d_update_out);
