#include "kernels/causal_conv1d.h"
#include "kernels/cpu/common/parallel.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <vector>

namespace customops::cpu::CPU_CAPABILITY {
namespace {

// The core's filter over every (b, c) row, in parallel.
template <bool kReverse, typename scalar_t>
void filter_rows(const scalar_t* in, const scalar_t* weight, const scalar_t* bias, scalar_t* out, int64_t rows,
                 int64_t C, int64_t L, int64_t K) {
  using opmath_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, rows, grain(L * K), [&](int64_t begin, int64_t end) {
    std::vector<opmath_t> row(L + K - 1), acc(L), taps(K);
    causal_conv1d_impl::filter_rows<kReverse>(in, weight, bias, out, begin, end, C, L, K, row.data(), acc.data(),
                                              taps.data());
  });
}

} // namespace

at::Tensor causal_conv1d(const at::Tensor& x_in, const at::Tensor& weight_in, const std::optional<at::Tensor>& bias) {
  const auto plan = causal_conv1d_impl::plan_forward(x_in, weight_in, bias);
  const int64_t C = plan.C, L = plan.L, K = plan.K;
  if (plan.out.numel() == 0) return plan.out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "causal_conv1d_cpu", [&] {
    filter_rows<false>(plan.x.const_data_ptr<scalar_t>(), plan.weight.const_data_ptr<scalar_t>(),
                       plan.bias.defined() ? plan.bias.const_data_ptr<scalar_t>() : nullptr,
                       plan.out.data_ptr<scalar_t>(), plan.B * C, C, L, K);
  });
  return plan.out;
}

causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_in, const at::Tensor& x_in,
                                                 const at::Tensor& weight_in, std::array<bool, 3> output_mask) {
  const auto plan = causal_conv1d_impl::plan_backward(grad_in, x_in, weight_in, output_mask);
  const int64_t B = plan.B, C = plan.C, L = plan.L, K = plan.K;
  const at::Tensor &gx = plan.grad_x, &gw = plan.grad_weight, &gb = plan.grad_bias;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "causal_conv1d_backward_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* g = plan.grad.const_data_ptr<scalar_t>();
    const scalar_t* x = plan.x.const_data_ptr<scalar_t>();
    const scalar_t* w = plan.weight.const_data_ptr<scalar_t>();
    if (gx.defined() && gx.numel() > 0) {
      // dx[t] = sum_j weight[K-1-j] * g[t + j]: the filter with its taps reversed, over g and K-1 zeros after it.
      filter_rows<true>(g, w, static_cast<const scalar_t*>(nullptr), gx.data_ptr<scalar_t>(), B * C, C, L, K);
    }
    if (!gw.defined() && !gb.defined()) return;
    // dweight[c, k] = sum_{b,t} g[b, c, t] * x[b, c, t - (K-1) + k] and dbias[c] = sum_{b,t} g[b, c, t]: a
    // channel's sums in one thread, in one order whatever the thread count (the same bits every run).
    scalar_t* dw = gw.defined() ? gw.data_ptr<scalar_t>() : nullptr;
    scalar_t* db = gb.defined() ? gb.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, C, grain(B * L * (K + 1)), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> row(L + K - 1, opmath_t(0)), grow(L), sums(K + 1);
      for (int64_t c = begin; c < end; ++c) {
        std::fill(sums.begin(), sums.end(), opmath_t(0));
        for (int64_t b = 0; b < B; ++b) {
          const int64_t r = b * C + c;
          std::copy(x + r * L, x + (r + 1) * L, row.begin() + (K - 1));
          std::copy(g + r * L, g + (r + 1) * L, grow.begin());
          for (int64_t k = 0; k < K; ++k) {
            const opmath_t* src = row.data() + k;
            opmath_t s = 0;
            for (int64_t t = 0; t < L; ++t) s += grow[t] * src[t];
            sums[k] += s;
          }
          opmath_t s = 0;
          for (int64_t t = 0; t < L; ++t) s += grow[t];
          sums[K] += s;
        }
        if (dw) {
          for (int64_t k = 0; k < K; ++k) dw[c * K + k] = static_cast<scalar_t>(sums[k]);
        }
        if (db) db[c] = static_cast<scalar_t>(sums[K]);
      }
    });
  });
  return plan.result();
}

} // namespace customops::cpu::CPU_CAPABILITY
