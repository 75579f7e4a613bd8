// causal_conv1d's CPU filter on raw pointers, shared by libtorch's CPU kernels (kernels/cpu/causal_conv1d.cpp)
// and ExecuTorch's (kernels/executorch/causal_conv1d.cpp): one formula, every runtime.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace customops::causal_conv1d_impl {

// Widths of the filter the kernels take (every runtime's): sequence models use 2 to 4; the CUDA weight gradient
// keeps one running sum per tap in registers, so K is bounded.
constexpr int64_t kMaxWidth = 8;
// Internal linkage: the CPU kernels compile this once per instruction set (kernels/cpu/), and one shared
// symbol would let the linker keep any one of those copies for every caller.
namespace {

// out[t] = bias + sum_j taps[j] * in[t + j] for t < L, over a row `in` of
// L + K - 1 values (the sequence with its K-1 zeros): tap by tap, so that
// each pass over t vectorises.
template <typename opmath_t>
void filter_row(const opmath_t* in, const opmath_t* taps, int64_t K, int64_t L, opmath_t bias, opmath_t* out) {
  std::fill(out, out + L, bias);
  for (int64_t j = 0; j < K; ++j) {
    const opmath_t tap = taps[j];
    const opmath_t* src = in + j;
    for (int64_t t = 0; t < L; ++t) out[t] += tap * src[t];
  }
}

// The filter over rows [begin, end) of `in` (rows of L values, row r of channel r % C) into `out`: the forward
// (taps weight[c], K-1 zeros before each row, bias when not null) or, with kReverse, the input gradient (taps
// reversed, K-1 zeros after each row, no bias). Scratch of the caller's, so that a task allocates it once:
// row (L + K - 1 values), acc (L) and taps (K), of the accumulation type.
template <bool kReverse, typename scalar_t, typename opmath_t>
void filter_rows(const scalar_t* in, const scalar_t* weight, const scalar_t* bias, scalar_t* out, int64_t begin,
                 int64_t end, int64_t C, int64_t L, int64_t K, opmath_t* row, opmath_t* acc, opmath_t* taps) {
  // The row in opmath beside its K-1 zeros (the steps before t = 0, or after the last).
  std::fill(row, row + L + K - 1, opmath_t(0));
  for (int64_t r = begin; r < end; ++r) {
    const int64_t c = r % C;
    for (int64_t j = 0; j < K; ++j) taps[j] = static_cast<opmath_t>(weight[c * K + (kReverse ? K - 1 - j : j)]);
    std::copy(in + r * L, in + (r + 1) * L, row + (kReverse ? 0 : K - 1));
    filter_row(row, taps, K, L, bias ? static_cast<opmath_t>(bias[c]) : opmath_t(0), acc);
    for (int64_t t = 0; t < L; ++t) out[r * L + t] = static_cast<scalar_t>(acc[t]);
  }
}

// The decoding step (causal_conv1d.update) on one (b, c) row: L new steps x[t * xs] after the steps held in
// the row's state (S values, state[i * ss]), which then holds the last S steps. Without a circular buffer the
// state is those steps in order, oldest first: it shifts left by L and x fills its end. With one (`circular`,
// start = the steps seen so far, cache_seqlens), step n lives at state[n mod S]: the K-1 steps before x are read
// from there and x is written after them, in order (the last one wins where L > S). out[t * os] = act(bias +
// sum_k taps[k] * (the K-1 steps before, then x)[t + k]); `window` is scratch of K-1+L values.
template <typename scalar_t, typename opmath_t>
void update_row(const scalar_t* x, int64_t xs, scalar_t* state, int64_t ss, int64_t S, const scalar_t* taps,
                opmath_t bias, bool silu, int64_t L, int64_t K, bool circular, int64_t start, scalar_t* out,
                int64_t os, opmath_t* window) {
  const auto wrap = [S](int64_t n) { return ((n % S) + S) % S; };  // as torch.remainder, for any sign
  for (int64_t j = 0; j < K - 1; ++j) {
    const int64_t i = !circular ? S - (K - 1) + j : wrap(start - (K - 1) + j);
    window[j] = static_cast<opmath_t>(state[i * ss]);
  }
  for (int64_t t = 0; t < L; ++t) window[K - 1 + t] = static_cast<opmath_t>(x[t * xs]);
  for (int64_t t = 0; t < L; ++t) {
    opmath_t acc = bias;
    for (int64_t k = 0; k < K; ++k) acc += static_cast<opmath_t>(taps[k]) * window[t + k];
    if (silu) acc = acc / (opmath_t(1) + std::exp(-acc));
    out[t * os] = static_cast<scalar_t>(acc);
  }
  if (circular) {
    for (int64_t t = 0; t < L; ++t) state[wrap(start + t) * ss] = x[t * xs];
  } else if (L >= S) {
    for (int64_t i = 0; i < S; ++i) state[i * ss] = x[(L - S + i) * xs];
  } else {
    for (int64_t i = 0; i + L < S; ++i) state[i * ss] = state[(i + L) * ss];
    for (int64_t t = 0; t < L; ++t) state[(S - L + t) * ss] = x[t * xs];
  }
}

} // namespace
} // namespace customops::causal_conv1d_impl
