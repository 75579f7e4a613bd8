// causal_conv1d.update on CUDA, the decoding step: one thread per (b, c) row, a block per (batch row, tile of
// kThreads channels), so that consecutive threads read consecutive channels of a (B, C) token. The K-1 steps before
// x live in registers (the width is a template argument) while the thread walks x's L steps, then it writes the
// row's state: a decoding step moves a few values per channel, too few to share a row between threads. Short
// contiguous state rows pass through shared memory on their way in and out (see kStagedSteps).
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
#include <type_traits>

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

// Every state row of kStagedSteps steps or fewer that lies in memory as (B_cache, C, S), contiguous in its last
// two dimensions, is staged: a block's rows are one run of memory, copied into shared memory and back in 16-byte
// vectors, where a thread's own row, a few bytes at the state's stride, would be read and written an element at a
// time in partial sectors (about half the copy's rate at batch 256 on an H100).
constexpr int kStagedSteps = 8;

// n elements from src to dst by the block's threads: 16-byte vectors where both ends allow them.
template <typename scalar_t>
__device__ __forceinline__ void block_copy(scalar_t* dst, const scalar_t* src, int n) {
  constexpr int V = 16 / sizeof(scalar_t);
  if (n % V == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int i = threadIdx.x; i < n / V; i += kThreads) {
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    }
  } else {
    for (int i = threadIdx.x; i < n; i += kThreads) dst[i] = src[i];
  }
}

// kCircular: cache_seqlens given. S and L are below 2^29 (checked by the caller): decoding steps are short, and
// 32-bit counters keep the kernel's registers, hence the threads resident per multiprocessor, where a step that
// moves a few values per thread needs them. kStaged: see kStagedSteps.
template <typename scalar_t, int K, bool kCircular, bool kStaged>
__global__ void __launch_bounds__(kThreads) update_kernel(const UpdateArgs<scalar_t> a) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  __shared__ __align__(16) scalar_t rows[kStaged ? kThreads * kStagedSteps : 1];
  const int64_t c0 = blockIdx.x * int64_t(kThreads), c = c0 + threadIdx.x;
  const bool live = c < a.C;  // a thread past C still takes its part in the block's copies
  const int S = static_cast<int>(a.S), L = static_cast<int>(a.L);
  // The block's staged elements (S is at most kStagedSteps there).
  const int chunk = kStaged ? static_cast<int>(std::min<int64_t>(kThreads, a.C - c0)) * S : 0;
  opmath_t taps[K];
#pragma unroll
  for (int k = 0; k < K; ++k) taps[k] = live ? static_cast<opmath_t>(a.weight[c * K + k]) : opmath_t(0);
  const opmath_t bias = live && a.bias != nullptr ? static_cast<opmath_t>(a.bias[c]) : opmath_t(0);
  for (int64_t b = blockIdx.y; b < a.B; b += gridDim.y) {
    const scalar_t* x = a.x + b * a.xs0 + c * a.xs1;
    scalar_t* out = a.out + b * a.os0 + c * a.os1;
    const int64_t row = a.indices != nullptr ? int64_t(a.indices[b]) : b;  // the same for the whole block
    if (row < 0) {  // a padding row: zeros out, no state to touch
      if (live) {
        for (int t = 0; t < L; ++t) out[t * a.os2] = scalar_t(0);
      }
      continue;
    }
    CUDA_KERNEL_ASSERT(row < a.rows && "customops::causal_conv1d.update: conv_state_indices out of range");
    scalar_t* const global = a.state + row * a.ss0 + c0 * a.ss1;
    if constexpr (kStaged) {
      __syncthreads();  // the previous row's copy out has read the rows
      block_copy(rows, global, chunk);
      __syncthreads();
    }
    if (live) {
      scalar_t* state = kStaged ? rows + threadIdx.x * S : global + threadIdx.x * a.ss1;
      const int64_t step = kStaged ? 1 : a.ss2;
      // Slot at(i) holds the state's step i (oldest first): a circular state's next write goes to slot start,
      // its oldest step sits there; an ordered state's oldest is slot 0.
      const int start = kCircular ? ((a.cache_seqlens[b] % S) + S) % S : 0;
      const auto at = [&](int i) { return kCircular ? (start + i) % S : i; };  // i in [0, 2S)
      // window[j]: the step K-1-j before the next one (oldest first).
      opmath_t window[K > 1 ? K - 1 : 1];
#pragma unroll
      for (int j = 0; j < K - 1; ++j) window[j] = static_cast<opmath_t>(state[at(S - (K - 1) + j) * step]);
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
        for (int t = L > S ? L - S : 0; t < L; ++t) state[((start + t) % S) * step] = x[t * a.xs2];
      } else {
        // Shift by L and append x: slot i takes step i + L of (state, x). In increasing i a slot is read before
        // it is written.
        for (int i = 0; i < S; ++i) state[i * step] = i + L < S ? state[(i + L) * step] : x[(i + L - S) * a.xs2];
      }
    }
    if constexpr (kStaged) {
      __syncthreads();
      block_copy(global, rows, chunk);
    }
  }
}

template <typename scalar_t, int K>
void launch_width(const UpdateArgs<scalar_t>& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.C + kThreads - 1) / kThreads),
                  static_cast<unsigned>(std::min<int64_t>(a.B, 65535)));
  const bool staged = a.ss2 == 1 && a.ss1 == a.S && a.S <= kStagedSteps;
  const auto launch = [&](auto circular, auto stage) {
    update_kernel<scalar_t, K, decltype(circular)::value, decltype(stage)::value><<<grid, kThreads, 0, stream>>>(a);
  };
  const auto with_staging = [&](auto circular) {
    if (staged) {
      launch(circular, std::true_type{});
    } else {
      launch(circular, std::false_type{});
    }
  };
  if (a.cache_seqlens != nullptr) {
    with_staging(std::true_type{});
  } else {
    with_staging(std::false_type{});
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
