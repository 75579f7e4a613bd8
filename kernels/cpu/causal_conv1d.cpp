#include "kernels/causal_conv1d.h"
#include "kernels/cpu/common/parallel.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cmath>
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

namespace {

// One (b, c) row of the extended call, read through strides (x in place, whatever its layout): `ext` gets the
// K-1 steps before t = 0 (initial_states, or zeros) then the L steps of x, in opmath.
template <typename scalar_t, typename opmath_t>
void load_row(const at::Tensor& x, const at::Tensor& init, int64_t b, int64_t c, int64_t K, opmath_t* ext) {
  const int64_t L = x.size(2);
  const scalar_t* xp = x.const_data_ptr<scalar_t>() + b * x.stride(0) + c * x.stride(1);
  if (init.defined()) {
    const scalar_t* ip = init.const_data_ptr<scalar_t>() + b * init.stride(0) + c * init.stride(1);
    for (int64_t j = 0; j < K - 1; ++j) ext[j] = static_cast<opmath_t>(ip[j * init.stride(2)]);
  } else {
    std::fill(ext, ext + K - 1, opmath_t(0));
  }
  for (int64_t t = 0; t < L; ++t) ext[K - 1 + t] = static_cast<opmath_t>(xp[t * x.stride(2)]);
}

// Whether step t reads tap k: the step it reads, t - (K-1) + k, belongs to t's sequence (always without seq_idx;
// before t = 0 only from initial_states, which are zeros where not given).
inline bool reads(const int32_t* seq, int64_t t, int64_t k, int64_t K) {
  if (seq == nullptr) return true;
  const int64_t s = t - (K - 1) + k;
  return s >= 0 && seq[s] == seq[t];
}

// The pre-activation of every step of a row: bias + sum_k w[k] * ext[t + k] over the taps t reads.
template <typename opmath_t>
void pre_activation(const opmath_t* ext, const opmath_t* taps, const int32_t* seq, int64_t K, int64_t L,
                    opmath_t bias, opmath_t* pre) {
  for (int64_t t = 0; t < L; ++t) {
    opmath_t acc = bias;
    for (int64_t k = 0; k < K; ++k) {
      if (reads(seq, t, k, K)) acc += taps[k] * ext[t + k];
    }
    pre[t] = acc;
  }
}

template <typename opmath_t>
opmath_t silu(opmath_t z) {
  return z / (opmath_t(1) + std::exp(-z));
}

// d silu(z) / dz = s (1 + z (1 - s)) with s = sigmoid(z).
template <typename opmath_t>
opmath_t silu_grad(opmath_t z) {
  const opmath_t s = opmath_t(1) / (opmath_t(1) + std::exp(-z));
  return s * (opmath_t(1) + z * (opmath_t(1) - s));
}

struct MambaPlan {
  at::Tensor x, weight, bias, seq_idx, init;  // weight, bias and seq_idx contiguous (small); x and init as given
  int64_t B, C, L, K;
  bool silu;
};

MambaPlan plan_mamba(const char* op, const at::Tensor& x, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                     const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states) {
  causal_conv1d_impl::check(op, x, weight, bias);
  const auto extras = causal_conv1d_impl::check_extras(op, x, weight, activation, seq_idx, initial_states);
  MambaPlan p;
  p.x = x;
  p.weight = weight.contiguous();
  if (causal_conv1d_impl::given(bias)) p.bias = bias->contiguous();
  if (extras.seq_idx.defined()) p.seq_idx = extras.seq_idx.contiguous();
  p.init = extras.initial_states;
  p.B = x.size(0);
  p.C = x.size(1);
  p.L = x.size(2);
  p.K = weight.size(1);
  p.silu = extras.silu;
  return p;
}

} // namespace

at::Tensor causal_conv1d_mamba(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
                               const std::optional<at::Tensor>& initial_states) {
  const auto p = plan_mamba("causal_conv1d", x, weight, bias, activation, seq_idx, initial_states);
  at::Tensor out = causal_conv1d_impl::empty_like_layout(x);
  if (out.numel() == 0) return out;
  const int64_t C = p.C, L = p.L, K = p.K;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_mamba_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    const int32_t* seq = p.seq_idx.defined() ? p.seq_idx.const_data_ptr<int32_t>() : nullptr;
    scalar_t* o = out.data_ptr<scalar_t>();
    const int64_t osb = out.stride(0), osc = out.stride(1), osl = out.stride(2);
    at::parallel_for(0, p.B * C, grain(L * K), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> ext(L + K - 1), pre(L), taps(K);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t b = r / C, c = r % C;
        for (int64_t k = 0; k < K; ++k) taps[k] = static_cast<opmath_t>(w[c * K + k]);
        load_row<scalar_t>(p.x, p.init, b, c, K, ext.data());
        pre_activation(ext.data(), taps.data(), seq ? seq + b * L : nullptr, K, L,
                       bp ? static_cast<opmath_t>(bp[c]) : opmath_t(0), pre.data());
        scalar_t* orow = o + b * osb + c * osc;
        for (int64_t t = 0; t < L; ++t) orow[t * osl] = static_cast<scalar_t>(p.silu ? silu(pre[t]) : pre[t]);
      }
    });
  });
  return out;
}

causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> output_mask, std::optional<c10::string_view> activation,
    const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states) {
  const auto p = plan_mamba("causal_conv1d_backward", x, weight, bias, activation, seq_idx, initial_states);
  causal_conv1d_impl::check_grad_out(grad_out, x);
  const int64_t B = p.B, C = p.C, L = p.L, K = p.K;
  at::Tensor gx, gw, gb, gi;
  if (output_mask[0]) gx = causal_conv1d_impl::empty_like_layout(x);
  if (output_mask[1]) gw = at::empty({C, K}, weight.options());
  if (output_mask[2]) gb = at::empty({C}, x.options());
  if (output_mask[3]) gi = at::empty({B, C, K - 1}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_mamba_backward_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* w = p.weight.const_data_ptr<scalar_t>();
    const scalar_t* bp = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
    const int32_t* seq_all = p.seq_idx.defined() ? p.seq_idx.const_data_ptr<int32_t>() : nullptr;
    const scalar_t* g = grad_out.const_data_ptr<scalar_t>();
    const int64_t gsb = grad_out.stride(0), gsc = grad_out.stride(1), gsl = grad_out.stride(2);
    scalar_t* dx = gx.defined() ? gx.data_ptr<scalar_t>() : nullptr;
    scalar_t* dw = gw.defined() ? gw.data_ptr<scalar_t>() : nullptr;
    scalar_t* db = gb.defined() ? gb.data_ptr<scalar_t>() : nullptr;
    scalar_t* di = gi.defined() ? gi.data_ptr<scalar_t>() : nullptr;
    // A channel's rows in one thread, batch by batch in order: the weight and bias sums come out the same bits
    // whatever the thread count.
    at::parallel_for(0, C, grain(B * L * K * 3), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> ext(L + K - 1), pre(L), gp(L), dext(L + K - 1), taps(K), sums(K + 1);
      for (int64_t c = begin; c < end; ++c) {
        for (int64_t k = 0; k < K; ++k) taps[k] = static_cast<opmath_t>(w[c * K + k]);
        std::fill(sums.begin(), sums.end(), opmath_t(0));
        for (int64_t b = 0; b < B; ++b) {
          const int32_t* seq = seq_all ? seq_all + b * L : nullptr;
          load_row<scalar_t>(p.x, p.init, b, c, K, ext.data());
          const scalar_t* grow = g + b * gsb + c * gsc;
          for (int64_t t = 0; t < L; ++t) gp[t] = static_cast<opmath_t>(grow[t * gsl]);
          if (p.silu) {
            pre_activation(ext.data(), taps.data(), seq, K, L, bp ? static_cast<opmath_t>(bp[c]) : opmath_t(0),
                           pre.data());
            for (int64_t t = 0; t < L; ++t) gp[t] *= silu_grad(pre[t]);
          }
          // Step t read ext[t + k] with tap k: that input's gradient gets taps[k] * gp[t], the tap's gets
          // gp[t] * ext[t + k].
          std::fill(dext.begin(), dext.end(), opmath_t(0));
          for (int64_t t = 0; t < L; ++t) {
            sums[K] += gp[t];
            for (int64_t k = 0; k < K; ++k) {
              if (!reads(seq, t, k, K)) continue;
              dext[t + k] += taps[k] * gp[t];
              sums[k] += gp[t] * ext[t + k];
            }
          }
          if (dx) {
            scalar_t* drow = dx + b * gx.stride(0) + c * gx.stride(1);
            for (int64_t t = 0; t < L; ++t) drow[t * gx.stride(2)] = static_cast<scalar_t>(dext[K - 1 + t]);
          }
          if (di) {
            for (int64_t j = 0; j < K - 1; ++j) di[(b * C + c) * (K - 1) + j] = static_cast<scalar_t>(dext[j]);
          }
        }
        if (dw) {
          for (int64_t k = 0; k < K; ++k) dw[c * K + k] = static_cast<scalar_t>(sums[k]);
        }
        if (db) db[c] = static_cast<scalar_t>(sums[K]);
      }
    });
  });
  return {gx, gw, gb, gi};
}

at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                                const std::optional<at::Tensor>& cache_seqlens,
                                const std::optional<at::Tensor>& conv_state_indices) {
  const auto u = causal_conv1d_impl::check_update(x, conv_state, weight, bias, activation, cache_seqlens,
                                                  conv_state_indices);
  // x, out and the state as (B, C, L) and (B_cache, C, S), read and written through their strides.
  const at::Tensor x3 = x.dim() == 2 ? x.unsqueeze(-1) : x;
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const at::Tensor out3 = x.dim() == 2 ? out.unsqueeze(-1) : out;
  const int64_t B = x3.size(0), C = x3.size(1), L = x3.size(2), K = weight.size(1), S = conv_state.size(2);
  if (out.numel() == 0) return out;
  const at::Tensor w = weight.contiguous();
  const at::Tensor bs = causal_conv1d_impl::given(bias) ? bias->contiguous() : at::Tensor();
  const at::Tensor seqlens = u.cache_seqlens.defined() ? u.cache_seqlens.contiguous() : at::Tensor();
  const at::Tensor indices = u.conv_state_indices.defined() ? u.conv_state_indices.contiguous() : at::Tensor();
  if (indices.defined()) causal_conv1d_impl::check_state_indices(indices, conv_state.size(0));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_update_cpu", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const scalar_t* xp = x3.const_data_ptr<scalar_t>();
    scalar_t* sp = conv_state.data_ptr<scalar_t>();
    scalar_t* op = out3.data_ptr<scalar_t>();
    const scalar_t* wp = w.const_data_ptr<scalar_t>();
    const scalar_t* bp = bs.defined() ? bs.const_data_ptr<scalar_t>() : nullptr;
    const int32_t* lens = seqlens.defined() ? seqlens.const_data_ptr<int32_t>() : nullptr;
    const int32_t* idx = indices.defined() ? indices.const_data_ptr<int32_t>() : nullptr;
    at::parallel_for(0, B * C, grain(L * K + S), [&](int64_t begin, int64_t end) {
      std::vector<opmath_t> window(K - 1 + L);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t b = r / C, c = r % C;
        scalar_t* orow = op + b * out3.stride(0) + c * out3.stride(1);
        const int64_t row = idx ? idx[b] : b;
        if (row < 0) {  // a padding row: zeros out, no state to touch
          for (int64_t t = 0; t < L; ++t) orow[t * out3.stride(2)] = scalar_t(0);
          continue;
        }
        causal_conv1d_impl::update_row(xp + b * x3.stride(0) + c * x3.stride(1), x3.stride(2),
                                       sp + row * conv_state.stride(0) + c * conv_state.stride(1),
                                       conv_state.stride(2), S, wp + c * K,
                                       bp ? static_cast<opmath_t>(bp[c]) : opmath_t(0), u.silu, L, K,
                                       lens != nullptr, lens ? int64_t(lens[b]) : 0, orow, out3.stride(2), window.data());
      }
    });
  });
  return out;
}

} // namespace customops::cpu::CPU_CAPABILITY
