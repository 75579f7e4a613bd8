// causal_conv1d.update on CUDA, the decoding step, two kernels:
// - update_words_kernel, the fast path: a thread per (b, VEC = kBytes / sizeof(scalar_t) consecutive channels),
//   every tensor moved in kBytes words. 16-byte words: a step of 256 rows of 5120 channels moved its bytes at 86%
//   of a copy's rate on an H100, twice as fast as a thread per channel. 4-byte words (2 channels of a half type, 1
//   float) for the batches whose 16-byte words would leave most of the GPU idle (launch_update). It takes the
//   common states only: no cache_seqlens, K <= 4, S = K-1 or K, C % VEC == 0, the state's rows in one of two
//   layouts ((B, C, S) contiguous by row, or Mamba 2's channel-innermost (B, S, C) seen transposed) and the
//   pointers aligned (update_words_plan says which); x and out take words where their layout allows, else single
//   elements.
// - update_kernel, everything else: one thread per (b, c) row, a block per (batch row, tile of kThreads
//   channels), so that consecutive threads read consecutive channels of a (B, C) token.
// Both keep the steps before x in registers (the width is a template argument) while the thread walks x's L steps,
// then write the row's state: a decoding step moves a few values per channel, too few to share a row between
// threads. They sum in the same order, so the two give the same bits.
#include "kernels/causal_conv1d.h"
#include "kernels/cuda/causal_conv1d/sigmoid.cuh"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/launch.cuh"

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

// The fast path's word of kBytes (16 or 4): VEC elements in kBytes / 4 32-bit registers, two to a register for
// the half types, so that the state stays packed while a step's shift moves whole words. get and set take an
// element's bits, not its value: a copied step keeps them (a NaN its payload), as in update_kernel.
template <typename scalar_t, int kBytes>
struct Word {
  static_assert(kBytes == 16 || kBytes == 4, "the fast path's words");
  static constexpr int kN = kBytes / static_cast<int>(sizeof(scalar_t));
  uint32_t r[kBytes / 4];

  __device__ __forceinline__ scalar_t get(int j) const {
    if constexpr (sizeof(scalar_t) == 4) {
      return __uint_as_float(r[j]);
    } else {
      return scalar_t(static_cast<uint16_t>(r[j / 2] >> (16 * (j % 2))), scalar_t::from_bits());
    }
  }
  __device__ __forceinline__ void set(int j, scalar_t v) {
    if constexpr (sizeof(scalar_t) == 4) {
      r[j] = __float_as_uint(v);
    } else {
      const int shift = 16 * (j % 2);
      r[j / 2] = (r[j / 2] & ~(0xffffu << shift)) | (uint32_t(v.x) << shift);
    }
  }
};

// Blocks of four warps, five resident per multiprocessor: ptxas keeps every instantiation within the 102 registers
// that leaves, without spilling (unbounded, the widest took 107: room for four). The 4-byte words take 38-56.
constexpr int kWordThreads = 128;
constexpr int kWordBlocksPerSM = 5;

// The word at p (kBytes aligned): one load or store of kBytes, through the intrinsics of the default cache
// policies (ld.global.ca, st.global.wb). A plain copy of a struct can come out as four 4-byte or eight 2-byte
// accesses (seen for the state's stores).
template <int kBytes, typename scalar_t>
__device__ __forceinline__ Word<scalar_t, kBytes> read_word(const scalar_t* p) {
  if constexpr (kBytes == 16) {
    const uint4 u = __ldca(reinterpret_cast<const uint4*>(p));
    return Word<scalar_t, kBytes>{{u.x, u.y, u.z, u.w}};
  } else {
    return Word<scalar_t, kBytes>{{__ldca(reinterpret_cast<const unsigned int*>(p))}};
  }
}

template <typename scalar_t, int kBytes>
__device__ __forceinline__ void write_word(scalar_t* p, const Word<scalar_t, kBytes>& w) {
  if constexpr (kBytes == 16) {
    __stwb(reinterpret_cast<uint4*>(p), make_uint4(w.r[0], w.r[1], w.r[2], w.r[3]));
  } else {
    __stwb(reinterpret_cast<unsigned int*>(p), w.r[0]);
  }
}

// VEC elements stride apart: one word where whole (stride 1, p aligned), else one element each.
template <int kBytes, typename scalar_t>
__device__ __forceinline__ Word<scalar_t, kBytes> load_word(const scalar_t* p, int64_t stride, bool whole) {
  if (whole) return read_word<kBytes>(p);
  Word<scalar_t, kBytes> w{};
#pragma unroll
  for (int j = 0; j < Word<scalar_t, kBytes>::kN; ++j) w.set(j, p[j * stride]);
  return w;
}

template <typename scalar_t, int kBytes>
__device__ __forceinline__ void store_word(scalar_t* p, int64_t stride, bool whole, const Word<scalar_t, kBytes>& w) {
  if (whole) return write_word(p, w);
#pragma unroll
  for (int j = 0; j < Word<scalar_t, kBytes>::kN; ++j) p[j * stride] = w.get(j);
}

// update_kernel's non-circular branch for VEC channels c0.. of a thread, in words of kBytes. kSlotMajor: the
// state's channel stride is 1 (slot s of the VEC channels one word at s * ss2), else its rows are contiguous (the
// VEC rows S words at c0 * S). The state stays in its bits, converted for the sums only.
// x_words, out_words: x's and out's VEC channels are one word at each step.
template <typename scalar_t, int kBytes, int K, int S, bool kSlotMajor>
__global__ void __launch_bounds__(kWordThreads, kWordBlocksPerSM)
    update_words_kernel(const UpdateArgs<scalar_t> a, const bool x_words, const bool out_words) {
  using opmath_t = at::opmath_type<scalar_t>;
  using W = Word<scalar_t, kBytes>;
  constexpr int V = W::kN;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  static_assert(K >= 2 && (S == K - 1 || S == K), "the fast path's widths and states");
  const int64_t c0 = (blockIdx.x * int64_t(kWordThreads) + threadIdx.x) * V;
  if (c0 >= a.C) return;
  const int L = static_cast<int>(a.L);
  // The VEC rows of the (C, K) weight are K words.
  W wk[K];
#pragma unroll
  for (int i = 0; i < K; ++i) wk[i] = read_word<kBytes>(a.weight + c0 * K + i * V);
  const W bw = a.bias != nullptr ? read_word<kBytes>(a.bias + c0) : W{};  // +0 bits: update_kernel's bias of none
  const auto tap = [&](int j, int k) { return static_cast<opmath_t>(wk[(j * K + k) / V].get((j * K + k) % V)); };
  for (int64_t b = blockIdx.y; b < a.B; b += gridDim.y) {
    const scalar_t* x = a.x + b * a.xs0 + c0 * a.xs1;
    scalar_t* out = a.out + b * a.os0 + c0 * a.os1;
    W xw = load_word<kBytes>(x, a.xs1, x_words);  // step 0, in flight with the index
    const int64_t row = a.indices != nullptr ? int64_t(a.indices[b]) : b;
    if (row < 0) {  // a padding row: zeros out, no state to touch
      for (int t = 0; t < L; ++t) store_word(out + t * a.os2, a.os1, out_words, W{});
      continue;
    }
    CUDA_KERNEL_ASSERT(row < a.rows && "customops::causal_conv1d.update: conv_state_indices out of range");
    scalar_t* state = a.state + row * a.ss0 + (kSlotMajor ? c0 : c0 * S);
    const auto word_at = [&](int i) { return state + (kSlotMajor ? i * a.ss2 : i * V); };
    // slot[s]: step s of the VEC channels, oldest first, so that a step's shift moves whole words. Row-major, the
    // S words hold channel j's step s at element j * S + s.
    W slot[S]{};
    if constexpr (kSlotMajor) {
#pragma unroll
      for (int s = 0; s < S; ++s) slot[s] = read_word<kBytes>(word_at(s));
    } else {
      W rows[S];
#pragma unroll
      for (int i = 0; i < S; ++i) rows[i] = read_word<kBytes>(word_at(i));
#pragma unroll
      for (int j = 0; j < V; ++j) {
#pragma unroll
        for (int s = 0; s < S; ++s) slot[s].set(j, rows[(j * S + s) / V].get((j * S + s) % V));
      }
    }
    for (int t = 0; t < L; ++t) {
      if (t > 0) xw = load_word<kBytes>(x + t * a.xs2, a.xs1, x_words);
      W ow{};
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const opmath_t v = static_cast<opmath_t>(xw.get(j));
        opmath_t acc = static_cast<opmath_t>(bw.get(j)) + tap(j, K - 1) * v;
#pragma unroll
        for (int i = 0; i < K - 1; ++i) acc += tap(j, i) * static_cast<opmath_t>(slot[S - (K - 1) + i].get(j));
        if (a.silu) acc = silu<opmath_t, kFast>(acc);
        ow.set(j, static_cast<scalar_t>(acc));
      }
      // Shift by one and append x: after the L steps, the last S of (state, x).
#pragma unroll
      for (int s = 0; s + 1 < S; ++s) slot[s] = slot[s + 1];
      slot[S - 1] = xw;
      store_word(out + t * a.os2, a.os1, out_words, ow);
    }
    if constexpr (kSlotMajor) {
#pragma unroll
      for (int s = 0; s < S; ++s) write_word(word_at(s), slot[s]);
    } else {
      W rows[S]{};
#pragma unroll
      for (int j = 0; j < V; ++j) {
#pragma unroll
        for (int s = 0; s < S; ++s) rows[(j * S + s) / V].set((j * S + s) % V, slot[s].get(j));
      }
#pragma unroll
      for (int i = 0; i < S; ++i) write_word(word_at(i), rows[i]);
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

// Whether update_words_kernel in words of kBytes takes a call (launch_update asks for no type over 4 bytes), and
// how it reads x and writes out.
struct WordsPlan {
  bool fast = false, slot_major = false, x_words = false, out_words = false;
};

template <int kBytes, typename scalar_t>
WordsPlan update_words_plan(const UpdateArgs<scalar_t>& a, int64_t K) {
  constexpr int64_t V = Word<scalar_t, kBytes>::kN;
  const auto aligned = [](const void* p) { return launch::aligned(p, kBytes); };
  // A (B, C, L) tensor whose VEC channels are one word at every (b, t).
  const auto words = [&](const void* p, int64_t s0, int64_t s1, int64_t s2) {
    return s1 == 1 && s0 % V == 0 && (a.L == 1 || s2 % V == 0) && aligned(p);
  };
  WordsPlan plan;
  const bool row_major = a.ss1 == a.S && (a.ss2 == 1 || a.S == 1);
  plan.slot_major = !row_major && a.ss1 == 1 && a.ss2 % V == 0;
  plan.fast = a.cache_seqlens == nullptr && K >= 2 && K <= 4 &&
              (a.S == K - 1 || a.S == K) && a.C % V == 0 && (row_major || plan.slot_major) && a.ss0 % V == 0 &&
              aligned(a.state) && aligned(a.weight) && (a.bias == nullptr || aligned(a.bias));
  plan.x_words = words(a.x, a.xs0, a.xs1, a.xs2);
  plan.out_words = words(a.out, a.os0, a.os1, a.os2);
  return plan;
}

template <typename scalar_t, int kBytes, int K, int S>
void launch_words(const UpdateArgs<scalar_t>& a, const WordsPlan& plan, cudaStream_t stream) {
  constexpr int64_t V = Word<scalar_t, kBytes>::kN;
  const dim3 grid(static_cast<unsigned>((a.C / V + kWordThreads - 1) / kWordThreads),
                  static_cast<unsigned>(std::min<int64_t>(a.B, 65535)));
  if (plan.slot_major) {
    update_words_kernel<scalar_t, kBytes, K, S, true>
        <<<grid, kWordThreads, 0, stream>>>(a, plan.x_words, plan.out_words);
  } else {
    update_words_kernel<scalar_t, kBytes, K, S, false>
        <<<grid, kWordThreads, 0, stream>>>(a, plan.x_words, plan.out_words);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, int kBytes, int K>
void launch_words_width(const UpdateArgs<scalar_t>& a, const WordsPlan& plan, cudaStream_t stream) {
  if (a.S == K - 1) return launch_words<scalar_t, kBytes, K, K - 1>(a, plan, stream);
  return launch_words<scalar_t, kBytes, K, K>(a, plan, stream);
}

// Launches update_words_kernel in words of kBytes where it takes the call; false where not.
template <typename scalar_t, int kBytes>
bool launch_words_if_fast(const UpdateArgs<scalar_t>& a, int64_t K, cudaStream_t stream) {
  const WordsPlan plan = update_words_plan<kBytes>(a, K);
  if (!plan.fast) return false;
  switch (K) {
    case 2: launch_words_width<scalar_t, kBytes, 2>(a, plan, stream); break;
    case 3: launch_words_width<scalar_t, kBytes, 3>(a, plan, stream); break;
    default: launch_words_width<scalar_t, kBytes, 4>(a, plan, stream); break;
  }
  return true;
}

// Below this many 16-byte words (threads of the 16-byte form, padding rows included) per multiprocessor a call
// takes 4-byte words: a quarter of the channels per thread, four times the threads. The 16-byte form keeps up to
// kWordThreads * kWordBlocksPerSM = 640 threads resident per multiprocessor; at batch 1 (C=5120, bf16: 640 threads
// on the whole GPU) its threads, latency-bound on 8 channels each, took 3.1 us a step against 2.7 in 4-byte words.
// Measured on an H100 (bf16, width 4, SiLU, C = 1536 and 5120, batches 1-256): the 4-byte form was faster up to
// 279 words per multiprocessor and slower from 310 on (0.37 us of 4.0 at 310).
constexpr int64_t kWordsPerSMToFill = 256;

template <typename scalar_t>
void launch_update(const UpdateArgs<scalar_t>& a, int64_t K, cudaStream_t stream) {
  static_assert(causal_conv1d_impl::kMaxWidth == 8, "a width past 8 needs its case here");
  if constexpr (sizeof(scalar_t) <= 4) {
    // Every call the 16-byte words take, the 4-byte ones take too: a few words go to the 4-byte form, the others
    // to the 16-byte one or, where it refuses them, to update_kernel.
    const int64_t words16 = a.B * (a.C / Word<scalar_t, 16>::kN);
    const bool few = words16 < kWordsPerSMToFill * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    if (few ? launch_words_if_fast<scalar_t, 4>(a, K, stream) : launch_words_if_fast<scalar_t, 16>(a, K, stream)) {
      return;
    }
  }
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
