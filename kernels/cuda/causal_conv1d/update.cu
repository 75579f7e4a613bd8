// causal_conv1d.update on CUDA, the decoding step: one thread per (b, c) row, a block per (batch row, tile of
// kThreads channels), so that consecutive threads read consecutive channels of a (B, C) token. The K-1 steps before
// x live in registers (the width is a template argument) while the thread walks x's L steps, then it writes the
// row's state: a decoding step moves a few values per channel, too few to share a row between threads.
#include "kernels/causal_conv1d.h"
#include "kernels/cuda/causal_conv1d/sigmoid.cuh"
#include "kernels/cuda/common/device_guard.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <cstdint>

namespace customops::cuda {
namespace {

// Blocks of two warps: a batch of one token spreads its channels over more multiprocessors.
constexpr int kThreads = 64;

// Strides in elements; x and out as (B, C, L), the state as (B_cache, C, S).
template <typename scalar_t>
struct UpdateArgs {
  const scalar_t* x;
  int64_t xs0, xs1, xs2;
  scalar_t* state;
  int64_t ss0, ss1, ss2;
  scalar_t* out;
  int64_t os0, os1, os2;
  const scalar_t* weight;        // (C, K) contiguous
  const scalar_t* bias;          // nullptr where none
  const int32_t* cache_seqlens;  // nullptr: the state in order, oldest first
  const int32_t* indices;        // nullptr: row b's state is conv_state[b]
  int64_t B, C, L, S, rows;      // rows: conv_state.size(0)
  bool silu;
};

// The half types take the channel-last forward's SiLU (the fast logistic); float and double keep z / (1 + e^-z),
// as the other kernels compute it.
template <typename opmath_t, bool kFast>
__device__ __forceinline__ opmath_t silu(opmath_t z) {
  if constexpr (kFast) {
    return z * causal_conv1d_math::sigmoid<true>(z);
  } else {
    return z / (opmath_t(1) + ::exp(-z));
  }
}

// kCircular: cache_seqlens given. S and L are below 2^29 (checked by the caller): decoding steps are short, and
// 32-bit counters keep the kernel's registers, hence the threads resident per multiprocessor, where a step that
// moves a few values per thread needs them.
template <typename scalar_t, int K, bool kCircular>
__global__ void __launch_bounds__(kThreads) update_kernel(const UpdateArgs<scalar_t> a) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  const int64_t c = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (c >= a.C) return;
  const int S = static_cast<int>(a.S), L = static_cast<int>(a.L);
  opmath_t taps[K];
#pragma unroll
  for (int k = 0; k < K; ++k) taps[k] = static_cast<opmath_t>(a.weight[c * K + k]);
  const opmath_t bias = a.bias != nullptr ? static_cast<opmath_t>(a.bias[c]) : opmath_t(0);
  for (int64_t b = blockIdx.y; b < a.B; b += gridDim.y) {
    const scalar_t* x = a.x + b * a.xs0 + c * a.xs1;
    scalar_t* out = a.out + b * a.os0 + c * a.os1;
    const int64_t row = a.indices != nullptr ? int64_t(a.indices[b]) : b;
    if (row < 0) {  // a padding row: zeros out, no state to touch
      for (int t = 0; t < L; ++t) out[t * a.os2] = scalar_t(0);
      continue;
    }
    CUDA_KERNEL_ASSERT(row < a.rows && "customops::causal_conv1d.update: conv_state_indices out of range");
    scalar_t* state = a.state + row * a.ss0 + c * a.ss1;
    // Slot at(i) holds the state's step i (oldest first): a circular state's next write goes to slot start, its
    // oldest step sits there; an ordered state's oldest is slot 0.
    const int start = kCircular ? ((a.cache_seqlens[b] % S) + S) % S : 0;
    const auto at = [&](int i) { return kCircular ? (start + i) % S : i; };  // i in [0, 2S)
    // window[j]: the step K-1-j before the next one (oldest first).
    opmath_t window[K > 1 ? K - 1 : 1];
#pragma unroll
    for (int j = 0; j < K - 1; ++j) window[j] = static_cast<opmath_t>(state[at(S - (K - 1) + j) * a.ss2]);
    for (int t = 0; t < L; ++t) {
      const opmath_t v = static_cast<opmath_t>(x[t * a.xs2]);
      opmath_t acc = bias + taps[K - 1] * v;
#pragma unroll
      for (int j = 0; j < K - 1; ++j) acc += taps[j] * window[j];
#pragma unroll
      for (int j = 0; j + 1 < K - 1; ++j) window[j] = window[j + 1];
      if (K > 1) window[K > 1 ? K - 2 : 0] = v;
      if (a.silu) acc = silu<opmath_t, kFast>(acc);
      out[t * a.os2] = static_cast<scalar_t>(acc);
    }
    if constexpr (kCircular) {
      // The L new steps overwrite the oldest ones, in order: the last S of them where L > S.
      for (int t = L > S ? L - S : 0; t < L; ++t) state[((start + t) % S) * a.ss2] = x[t * a.xs2];
    } else {
      // Shift by L and append x: slot i takes step i + L of (state, x). In increasing i a slot is read before
      // it is written.
      for (int i = 0; i < S; ++i) state[i * a.ss2] = i + L < S ? state[(i + L) * a.ss2] : x[(i + L - S) * a.xs2];
    }
  }
}

template <typename scalar_t, int K>
void launch_width(const UpdateArgs<scalar_t>& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.C + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<int64_t>(a.B, 65535)));
  if (a.cache_seqlens != nullptr) {
    update_kernel<scalar_t, K, true><<<grid, kThreads, 0, stream>>>(a);
  } else {
    update_kernel<scalar_t, K, false><<<grid, kThreads, 0, stream>>>(a);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t>
void launch_update(const UpdateArgs<scalar_t>& a, int64_t K, cudaStream_t stream) {
  static_assert(causal_conv1d_impl::kMaxWidth == 8, "a width past 8 needs its case here");
  switch (K) {
    case 1: return launch_width<scalar_t, 1>(a, stream);
    case 2: return launch_width<scalar_t, 2>(a, stream);
    case 3: return launch_width<scalar_t, 3>(a, stream);
    case 4: return launch_width<scalar_t, 4>(a, stream);
    case 5: return launch_width<scalar_t, 5>(a, stream);
    case 6: return launch_width<scalar_t, 6>(a, stream);
    case 7: return launch_width<scalar_t, 7>(a, stream);
    default: return launch_width<scalar_t, 8>(a, stream);
  }
}

} // namespace

at::Tensor causal_conv1d_update(const at::Tensor& x, at::Tensor& conv_state, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                                const std::optional<at::Tensor>& cache_seqlens,
                                const std::optional<at::Tensor>& conv_state_indices) {
  // The checks see every device before anything runs; the guard is for the launch. conv_state_indices are
  // checked against the cache's rows on the device (an assert), not read back here.
  const auto u = causal_conv1d_impl::check_update(x, conv_state, weight, bias, activation, cache_seqlens,
                                                  conv_state_indices);
  const int64_t steps = x.dim() == 2 ? 1 : x.size(2);
  TORCH_CHECK(conv_state.size(2) < (int64_t(1) << 29) && steps < (int64_t(1) << 29),
              "causal_conv1d_update: conv_state's length and x's steps must be below 2^29, got ", conv_state.size(2),
              " and ", steps);
  const KernelGuard guard(x.device());
  const at::Tensor x3 = x.dim() == 2 ? x.unsqueeze(-1) : x;
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const at::Tensor out3 = x.dim() == 2 ? out.unsqueeze(-1) : out;
  if (out.numel() == 0) return out;
  const at::Tensor w = weight.contiguous();
  const at::Tensor bs = causal_conv1d_impl::given(bias) ? bias->contiguous() : at::Tensor();
  const at::Tensor seqlens = u.cache_seqlens.defined() ? u.cache_seqlens.contiguous() : at::Tensor();
  const at::Tensor indices = u.conv_state_indices.defined() ? u.conv_state_indices.contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_update_cuda", [&] {
    UpdateArgs<scalar_t> a{};
    a.x = x3.const_data_ptr<scalar_t>();
    a.xs0 = x3.stride(0), a.xs1 = x3.stride(1), a.xs2 = x3.stride(2);
    a.state = conv_state.data_ptr<scalar_t>();
    a.ss0 = conv_state.stride(0), a.ss1 = conv_state.stride(1), a.ss2 = conv_state.stride(2);
    a.out = out3.data_ptr<scalar_t>();
    a.os0 = out3.stride(0), a.os1 = out3.stride(1), a.os2 = out3.stride(2);
    a.weight = w.const_data_ptr<scalar_t>();
    a.bias = bs.defined() ? bs.const_data_ptr<scalar_t>() : nullptr;
    a.cache_seqlens = seqlens.defined() ? seqlens.const_data_ptr<int32_t>() : nullptr;
    a.indices = indices.defined() ? indices.const_data_ptr<int32_t>() : nullptr;
    a.B = x3.size(0), a.C = x3.size(1), a.L = x3.size(2), a.S = conv_state.size(2), a.rows = conv_state.size(0);
    a.silu = u.silu;
    launch_update(a, weight.size(1), at::cuda::getCurrentCUDAStream());
  });
  return out;
}

} // namespace customops::cuda
