// causal_conv1d.mamba on CUDA in Mamba's layout ((B, L, C) in memory), through shared-memory tiles of 64 steps x
// 64 channels, as Dao's channel-last kernels do: a block first issues every 16-byte copy of its tile (and the K-1
// steps around it that the window needs) as cp.async, all in flight at once, then each thread walks a run of steps
// of one channel from shared memory keeping the window in registers, and the results go back through the tile and
// out as 16-byte stores. The backward recomputes the pre-activation for the SiLU's derivative, produces the input
// gradient K-1 steps behind (the steps after s read s) and sums the weight and bias gradients per thread over the
// tiles its block takes, then over the block's threads in a fixed order into one slice per block row of a float
// workspace, which a second kernel sums over the slices in a fixed order (the same bits every run, no atomics). A
// thread per channel walking its steps from global memory, the layout's natural kernel, kept too few bytes in
// flight: about 40% of a copy's rate forward, 25% backward, on an H100; so did these tiles while their loads ran as
// a loop of one load and its store at a time (1.2-1.3x Dao's time forward, 1.5-1.8x forward + backward, against
// 1.0-1.1x with the copies in flight).
#include "kernels/cuda/causal_conv1d/channel_last.h"

#include "kernels/causal_conv1d.h"
#include "kernels/cuda/causal_conv1d/sigmoid.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/mma_sm80.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace customops::cuda::causal_conv1d_channel_last {
namespace {

using causal_conv1d_math::sigmoid;

// Tiles: kSteps steps x kChannels channels, kThreads threads, each thread one channel and a run of kSteps / kRuns
// steps. The backward holds two tiles (x and grad_out): double's are half as wide, within the 48 KB of static
// shared memory a block may hold.
template <typename scalar_t, bool kBackward>
struct TileShape {
  static constexpr int kSteps = 64, kThreads = 128;
  static constexpr int kChannels = kBackward && sizeof(scalar_t) == 8 ? 32 : 64;
  static constexpr int kVec = static_cast<int>(16 / sizeof(scalar_t));  // elements of a 16-byte access
  static constexpr int kRowVecs = kChannels / kVec, kRuns = kThreads / kChannels, kRun = kSteps / kRuns;
  static constexpr int kWidth = kChannels + kVec;  // a vector of padding per row keeps rows 16-byte aligned
};

// Blocks a multiprocessor should hold in the backward: 16-bit types' walk unrolls into more than 64 registers a
// thread unless bounded (a half of the blocks resident for a few spilled bytes); wider types' tiles hold fewer
// blocks by their shared memory anyway.
template <typename scalar_t>
constexpr int backward_min_blocks() {
  return sizeof(scalar_t) == 2 ? 8 : 1;
}

template <typename scalar_t, int V>
using Pack = launch::Pack<scalar_t, V>;

template <typename scalar_t, int V>
__device__ __forceinline__ Pack<scalar_t, V> load(const scalar_t* p) {
  return *reinterpret_cast<const Pack<scalar_t, V>*>(p);
}

template <typename scalar_t, int V>
__device__ __forceinline__ void store(scalar_t* p, const Pack<scalar_t, V>& v) {
  *reinterpret_cast<Pack<scalar_t, V>*>(p) = v;
}

// Strides in elements; channels are x's unit stride (and the outputs', in x's layout).
template <typename scalar_t>
struct Args {
  const scalar_t* x;
  int64_t xs0, xs2;
  const scalar_t* grad;  // the backward's grad_out
  int64_t gs0, gs2;
  scalar_t* out;  // the forward's y, the backward's grad_x (nullptr where not asked for)
  int64_t os0, os2;
  const scalar_t* init;  // nullptr: zeros before t = 0
  int64_t is0, is1, is2;
  scalar_t* dinit;                   // (B, C, K-1) contiguous, nullptr where not asked for
  const scalar_t* weight;            // (C, K) contiguous
  const scalar_t* bias;              // nullptr where none
  const int32_t* seq;                // (B, L) contiguous, nullptr where none
  at::opmath_type<scalar_t>* parts;  // [gridDim.y][K+1][C], nullptr where neither weight nor bias gradient is asked
  int64_t B, C, L;
  int64_t tiles;  // tiles of steps per batch row
};

// The block's copies (sm80::copy16: cp.async from sm_80 on, all of a thread's in flight at once, where a loop of
// loads each stored before the next keeps one in flight and waits on memory once per vector) have landed in
// shared memory and every thread sees them.
__device__ __forceinline__ void tile_ready() {
  sm80::copies_done();
  __syncthreads();
}

// Rows [0, R) of a tile from src (x or grad_out of batch row b, step stride s2): row r holds step first + r of
// channels c0.., zeros past L and past C, and before t = 0 zeros or, with `init`, initial_states' steps (K-1 of
// them, the first at row first + r = -(K-1)). C is a whole number of vectors: a vector is all in or all out. The
// loop's trip count is a constant so that it unrolls and every copy is issued before tile_ready waits.
template <typename Shape, int K, int R, typename scalar_t>
__device__ __forceinline__ void load_tile(scalar_t (&tile)[R][Shape::kWidth], const scalar_t* src, int64_t s2,
                                          const Args<scalar_t>& a, int64_t b, int64_t first, int64_t c0,
                                          bool init) {
  constexpr int kVec = Shape::kVec, kRowVecs = Shape::kRowVecs, kVectors = R * kRowVecs;
#pragma unroll
  for (int j = 0; j < (kVectors + Shape::kThreads - 1) / Shape::kThreads; ++j) {
    const int i = threadIdx.x + j * Shape::kThreads;
    if (i >= kVectors) break;
    const int r = i / kRowVecs, v = i - r * kRowVecs;
    const int64_t s = first + r, c = c0 + int64_t(v) * kVec;
    const bool in = c < a.C && s >= 0 && s < a.L;
    if (init && !in && c < a.C && s < 0) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) tile[r][v * kVec + e] = a.init[b * a.is0 + (c + e) * a.is1 + (K - 1 + s) * a.is2];
    } else {
      sm80::copy16(&tile[r][v * kVec], in ? src + s * s2 + c : src, in);
    }
  }
}

// Rows [0, kSteps) of a tile to out (batch row b): row r is step first + r; steps past L and channels past C are
// not written.
template <typename Shape, int R, typename scalar_t>
__device__ __forceinline__ void store_tile(const scalar_t (&tile)[R][Shape::kWidth], scalar_t* out, int64_t s2,
                                           int64_t L, int64_t C, int64_t first, int64_t c0) {
  constexpr int kVec = Shape::kVec, kRowVecs = Shape::kRowVecs, kVectors = Shape::kSteps * kRowVecs;
#pragma unroll
  for (int j = 0; j < (kVectors + Shape::kThreads - 1) / Shape::kThreads; ++j) {
    const int i = threadIdx.x + j * Shape::kThreads;
    if (i >= kVectors) break;
    const int r = i / kRowVecs, v = i - r * kRowVecs;
    const int64_t t = first + r, c = c0 + int64_t(v) * kVec;
    // As 16 raw bytes: copied as a Pack of 16-bit elements, the store is split into four 4-byte ones.
    if (t < L && c < C) {
      *reinterpret_cast<uint4*>(out + t * s2 + c) = *reinterpret_cast<const uint4*>(&tile[r][v * kVec]);
    }
  }
}

// Sequence ids of rows [0, R): step first + r's, -1 outside [0, L) (where x is zero or, without seq_idx,
// initial_states: seq_idx excludes them).
template <typename Shape, int R, typename scalar_t>
__device__ __forceinline__ void load_ids(int32_t (&ids)[R], const Args<scalar_t>& a, int64_t b, int64_t first) {
  for (int r = threadIdx.x; r < R; r += Shape::kThreads) {
    const int64_t s = first + r;
    ids[r] = s >= 0 && s < a.L ? a.seq[b * a.L + s] : -1;
  }
}

// Block (column of channels, tile of steps of one batch row); thread: channel ch of the tile, steps [s0, s0 + kRun)
// of it, at tile rows s0 + K-1 ...
template <typename scalar_t, int K, bool kSilu, bool kSeq>
__global__ void __launch_bounds__(TileShape<scalar_t, false>::kThreads) forward_kernel(const Args<scalar_t> a) {
  using S = TileShape<scalar_t, false>;
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  constexpr int kRows = S::kSteps + K - 1, kRun = S::kRun;
  __shared__ __align__(16) scalar_t tile[kRows][S::kWidth];
  __shared__ int32_t ids[kRows];
  const int64_t b = blockIdx.x / a.tiles, first = (blockIdx.x - b * a.tiles) * S::kSteps - (K - 1);
  const int64_t c0 = int64_t(blockIdx.y) * S::kChannels;
  load_tile<S, K>(tile, a.x + b * a.xs0, a.xs2, a, b, first, c0, a.init != nullptr);
  if constexpr (kSeq) load_ids<S>(ids, a, b, first);
  tile_ready();
  const int ch = threadIdx.x % S::kChannels, s0 = threadIdx.x / S::kChannels * kRun;
  const int64_t c = c0 + ch;
  opmath_t w[K], bias = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) w[k] = c < a.C ? static_cast<opmath_t>(a.weight[c * K + k]) : opmath_t(0);
  if (a.bias != nullptr && c < a.C) bias = static_cast<opmath_t>(a.bias[c]);
  opmath_t win[K], out[kRun];
#pragma unroll
  for (int k = 0; k < K - 1; ++k) win[k] = static_cast<opmath_t>(tile[s0 + k][ch]);
#pragma unroll
  for (int s = 0; s < kRun; ++s) {
    win[K - 1] = static_cast<opmath_t>(tile[s0 + s + K - 1][ch]);
    opmath_t acc = bias;
    if constexpr (kSeq) {
      const int32_t own = ids[s0 + s + K - 1];
#pragma unroll
      for (int k = 0; k < K; ++k) acc += ids[s0 + s + k] == own ? w[k] * win[k] : opmath_t(0);
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) acc += w[k] * win[k];
    }
    if constexpr (kSilu) acc *= sigmoid<kFast>(acc);
    out[s] = acc;
#pragma unroll
    for (int k = 0; k + 1 < K; ++k) win[k] = win[k + 1];
  }
  __syncthreads();  // every thread has read its inputs: the tile takes the results, row s for step first+K-1+s
#pragma unroll
  for (int s = 0; s < kRun; ++s) tile[s0 + s][ch] = static_cast<scalar_t>(out[s]);
  __syncthreads();
  store_tile<S>(tile, a.out + b * a.os0, a.os2, a.L, a.C, first + (K - 1), c0);
}

// Block: a column of channels and, in turn, tiles q = blockIdx.y, blockIdx.y + gridDim.y, ... of (batch row, steps
// [t0, t0 + kSteps)). Tile rows: x's row r is step t0 - (K-1) + r (the window before t0 and the K-1 steps after the
// tile, whose pre-activations the gradients of the tile's last steps need), grad_out's row r step t0 + r. A thread
// walks local steps lt = s0 .. s0 + kRun + K-2 of its channel: gp(lt), the gradient before the SiLU (zero past L),
// then the gradient of step ls = lt - (K-1), which steps ls..lt read with taps K-1..0 (those of its sequence with
// seq_idx): grad_x for ls in its run, initial_states' for ls < 0 (tile 0, run 0), where gp before t = 0 is zero. The
// weight and bias gradients sum gp times the taps' inputs over the thread's own steps, across the block's tiles.
template <typename scalar_t, int K, bool kSilu, bool kSeq>
__global__ void __launch_bounds__(TileShape<scalar_t, true>::kThreads, backward_min_blocks<scalar_t>())
    backward_kernel(const Args<scalar_t> a) {
  using S = TileShape<scalar_t, true>;
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  constexpr int kXRows = S::kSteps + 2 * (K - 1), kGRows = S::kSteps + K - 1, kRun = S::kRun;
  __shared__ __align__(16) scalar_t xs[kXRows][S::kWidth];
  __shared__ __align__(16) scalar_t gs[kGRows][S::kWidth];
  __shared__ int32_t ids[kXRows];
  const int64_t c0 = int64_t(blockIdx.x) * S::kChannels;
  const int ch = threadIdx.x % S::kChannels, run = threadIdx.x / S::kChannels, s0 = run * kRun;
  const int64_t c = c0 + ch;
  opmath_t w[K], bias = 0, dw[K], db = 0;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    w[k] = c < a.C ? static_cast<opmath_t>(a.weight[c * K + k]) : opmath_t(0);
    dw[k] = 0;
  }
  if (a.bias != nullptr && c < a.C) bias = static_cast<opmath_t>(a.bias[c]);
  for (int64_t q = blockIdx.y; q < a.B * a.tiles; q += gridDim.y) {
    const int64_t b = q / a.tiles, t0 = (q - b * a.tiles) * S::kSteps;
    __syncthreads();  // the previous tile's reads and stores are done
    load_tile<S, K>(xs, a.x + b * a.xs0, a.xs2, a, b, t0 - (K - 1), c0, a.init != nullptr);
    load_tile<S, K>(gs, a.grad + b * a.gs0, a.gs2, a, b, t0, c0, false);
    if constexpr (kSeq) load_ids<S>(ids, a, b, t0 - (K - 1));
    tile_ready();
    // gw[j]: gp of local step lt - (K-1) + j; xw[k], iw[k]: x and the sequence id of local step lt + k - (K-1),
    // the taps of step lt, slid along as the forward's window is.
    opmath_t gw[K], xw[K], dx[kRun];
    int32_t iw[K];
#pragma unroll
    for (int j = 0; j < K; ++j) gw[j] = 0;
#pragma unroll
    for (int k = 0; k + 1 < K; ++k) {
      xw[k] = static_cast<opmath_t>(xs[s0 + k][ch]);
      iw[k] = kSeq ? ids[s0 + k] : 0;
    }
#pragma unroll
    for (int i = 0; i < kRun + K - 1; ++i) {
      const int lt = s0 + i;
      xw[K - 1] = static_cast<opmath_t>(xs[lt + K - 1][ch]);
      iw[K - 1] = kSeq ? ids[lt + K - 1] : 0;
      opmath_t gp = 0;
      if (t0 + lt < a.L) {
        opmath_t taps[K], z = bias;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          taps[k] = iw[k] == iw[K - 1] ? xw[k] : opmath_t(0);
          z += w[k] * taps[k];
        }
        gp = static_cast<opmath_t>(gs[lt][ch]);
        if constexpr (kSilu) {
          const opmath_t sig = sigmoid<kFast>(z);
          gp *= sig * (opmath_t(1) + z * (opmath_t(1) - sig));
        }
        if (i < kRun) {
          db += gp;
#pragma unroll
          for (int k = 0; k < K; ++k) dw[k] += gp * taps[k];
        }
      }
      gw[K - 1] = gp;
      // Step ls = lt - (K-1) is read by step ls + j, whose id is iw[j], with tap K-1-j.
      const int ls = lt - (K - 1);
      if (i >= K - 1 || (t0 == 0 && s0 == 0 && a.dinit != nullptr)) {
        opmath_t acc = 0;
#pragma unroll
        for (int j = 0; j < K; ++j) acc += iw[j] == iw[0] ? w[K - 1 - j] * gw[j] : opmath_t(0);
        if (i >= K - 1) {
          dx[i - (K - 1)] = acc;
        } else if (c < a.C) {
          // Before t = 0. With seq_idx no step reads there: zeros.
          a.dinit[(b * a.C + c) * (K - 1) + (K - 1 + ls)] = kSeq ? scalar_t(0) : static_cast<scalar_t>(acc);
        }
      }
#pragma unroll
      for (int j = 0; j + 1 < K; ++j) {
        gw[j] = gw[j + 1];
        xw[j] = xw[j + 1];
        iw[j] = iw[j + 1];
      }
    }
    if (a.out != nullptr) {
      __syncthreads();  // every thread has read grad_out's tile: it takes grad_x, row r for step t0 + r
#pragma unroll
      for (int s = 0; s < kRun; ++s) gs[s0 + s][ch] = static_cast<scalar_t>(dx[s]);
      __syncthreads();
      store_tile<S>(gs, a.out + b * a.os0, a.os2, a.L, a.C, t0, c0);
    }
  }
  if (a.parts == nullptr) return;
  // The block's runs share channels: their sums, run by run in order, into the block row's slice.
  __shared__ opmath_t sums[S::kRuns][K + 1][S::kChannels];
#pragma unroll
  for (int k = 0; k < K; ++k) sums[run][k][ch] = dw[k];
  sums[run][K][ch] = db;
  __syncthreads();
  for (int i = threadIdx.x; i < (K + 1) * S::kChannels; i += S::kThreads) {
    const int k = i / S::kChannels, col = i - k * S::kChannels;
    if (c0 + col < a.C) {
      opmath_t sum = sums[0][k][col];
      for (int r = 1; r < S::kRuns; ++r) sum += sums[r][k][col];
      a.parts[(int64_t(blockIdx.y) * (K + 1) + k) * a.C + c0 + col] = sum;
    }
  }
}

// grad_weight (C, K) and grad_bias (C) from the workspace's G slices [G][K+1][C]: blockDim.y threads take every
// blockDim.y-th slice, then one sums theirs in order.
constexpr int kSumX = 32, kSumY = 8;

template <typename scalar_t>
__global__ void __launch_bounds__(kSumX* kSumY)
    sum_parts_kernel(const at::opmath_type<scalar_t>* __restrict__ parts, int64_t G, int64_t C, int K,
                     scalar_t* __restrict__ dw, scalar_t* __restrict__ db) {
  using opmath_t = at::opmath_type<scalar_t>;
  __shared__ opmath_t shared[kSumY][kSumX + 1];
  const int64_t n = (K + 1) * C, i = int64_t(blockIdx.x) * kSumX + threadIdx.x;
  opmath_t sum = 0;
  if (i < n) {
#pragma unroll 4
    for (int64_t g = threadIdx.y; g < G; g += kSumY) sum += parts[g * n + i];
  }
  shared[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || i >= n) return;
  for (int y = 1; y < kSumY; ++y) sum += shared[y][threadIdx.x];
  const int64_t k = i / C, c = i - k * C;
  if (k < K) {
    if (dw != nullptr) dw[c * K + k] = static_cast<scalar_t>(sum);
  } else if (db != nullptr) {
    db[c] = static_cast<scalar_t>(sum);
  }
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

template <typename scalar_t>
Args<scalar_t> args_for(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& seq_idx, const at::Tensor& init) {
  Args<scalar_t> a{};
  a.x = x.const_data_ptr<scalar_t>();
  a.xs0 = x.stride(0), a.xs2 = x.stride(2);
  if (init.defined()) {
    a.init = init.const_data_ptr<scalar_t>();
    a.is0 = init.stride(0), a.is1 = init.stride(1), a.is2 = init.stride(2);
  }
  a.weight = weight.const_data_ptr<scalar_t>();
  a.bias = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
  a.seq = seq_idx.defined() ? seq_idx.const_data_ptr<int32_t>() : nullptr;
  a.B = x.size(0), a.C = x.size(1), a.L = x.size(2);
  a.tiles = ceil_div(a.L, TileShape<scalar_t, false>::kSteps);
  return a;
}

// fn(width, silu, seq), all compile-time constants: the unrolled walks carry no branch on the activation or on
// seq_idx, and without seq_idx no sequence ids (fewer registers and instructions a step).
template <typename Fn>
void with_width(int64_t K, bool silu, bool seq, Fn&& fn) {
  const auto with_seq = [&](auto width, auto fused_silu) {
    if (seq) return fn(width, fused_silu, std::true_type{});
    return fn(width, fused_silu, std::false_type{});
  };
  const auto with_silu = [&](auto width) {
    if (silu) return with_seq(width, std::true_type{});
    return with_seq(width, std::false_type{});
  };
  switch (K) {
    case 2: return with_silu(std::integral_constant<int, 2>{});
    case 3: return with_silu(std::integral_constant<int, 3>{});
    case 4: return with_silu(std::integral_constant<int, 4>{});
    default: TORCH_INTERNAL_ASSERT(false, "causal_conv1d channel-last path: width ", K, " not taken");
  }
}

} // namespace

bool vectorisable(const at::Tensor& t) {
  if (t.dim() != 3 || t.stride(1) != 1) return false;
  const int64_t V = 16 / static_cast<int64_t>(t.element_size());
  return t.size(1) % V == 0 && t.stride(0) % V == 0 && t.stride(2) % V == 0 && launch::aligned(t.const_data_ptr(), 16);
}

bool takes(const at::Tensor& x, int64_t width) {
  return width >= 2 && width <= 4 && x.numel() > 0 && causal_conv1d_impl::channel_last(x) && vectorisable(x);
}

void forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& seq_idx,
             const at::Tensor& initial_states, bool silu, const at::Tensor& out) {
  TORCH_INTERNAL_ASSERT(takes(x, weight.size(1)) && vectorisable(out) && weight.is_contiguous());
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_channel_last", [&] {
    using S = TileShape<scalar_t, false>;
    auto a = args_for<scalar_t>(x, weight, bias, seq_idx, initial_states);
    a.out = out.data_ptr<scalar_t>();
    a.os0 = out.stride(0), a.os2 = out.stride(2);
    const int64_t tiles = a.B * a.tiles, columns = ceil_div(a.C, S::kChannels);
    TORCH_CHECK(tiles <= int64_t(std::numeric_limits<int32_t>::max()) && columns <= 65535,
                "causal_conv1d: x of ", a.B, " rows of ", a.L, " steps and ", a.C, " channels is too large");
    with_width(weight.size(1), silu, seq_idx.defined(), [&](auto K, auto fused_silu, auto seq) {
      forward_kernel<scalar_t, decltype(K)::value, decltype(fused_silu)::value, decltype(seq)::value>
          <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(columns)), S::kThreads, 0, stream>>>(a);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

void backward(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
              const at::Tensor& seq_idx, const at::Tensor& initial_states, bool silu, const at::Tensor& grad_x,
              const at::Tensor& grad_weight, const at::Tensor& grad_bias, const at::Tensor& grad_initial_states) {
  TORCH_INTERNAL_ASSERT(takes(x, weight.size(1)) && vectorisable(grad_out) && weight.is_contiguous());
  TORCH_INTERNAL_ASSERT(!grad_x.defined() || vectorisable(grad_x));
  TORCH_INTERNAL_ASSERT(!grad_initial_states.defined() || grad_initial_states.is_contiguous());
  const int64_t K = weight.size(1);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_backward_channel_last",
                                  [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    using S = TileShape<scalar_t, true>;
    auto a = args_for<scalar_t>(x, weight, bias, seq_idx, initial_states);
    a.grad = grad_out.const_data_ptr<scalar_t>();
    a.gs0 = grad_out.stride(0), a.gs2 = grad_out.stride(2);
    if (grad_x.defined()) {
      a.out = grad_x.data_ptr<scalar_t>();
      a.os0 = grad_x.stride(0), a.os2 = grad_x.stride(2);
    }
    if (grad_initial_states.defined() && grad_initial_states.numel() > 0) {
      a.dinit = grad_initial_states.data_ptr<scalar_t>();
    }
    const int64_t columns = ceil_div(a.C, S::kChannels), tiles = a.B * a.tiles;
    TORCH_CHECK(columns <= int64_t(std::numeric_limits<int32_t>::max()),
                "causal_conv1d: x of ", a.C, " channels is too large");
    const bool params = grad_weight.defined() || grad_bias.defined();
    at::Tensor parts;
    int64_t rows = 1;
    with_width(K, silu, seq_idx.defined(), [&](auto width, auto fused_silu, auto seq) {
      const auto kernel =
          backward_kernel<scalar_t, decltype(width)::value, decltype(fused_silu)::value, decltype(seq)::value>;
      // At most one wave of blocks (as many as the device holds at once), each taking as many tiles in turn: the
      // weight and bias gradients leave one workspace slice per block row, and a block past the wave would run all
      // its tiles after the wave's, as long again.
      const int64_t wave = launch::resident_blocks(kernel, S::kThreads, 0);
      const int64_t cap = std::clamp<int64_t>(wave / columns, 1, 65535);
      rows = ceil_div(tiles, ceil_div(tiles, cap));
      if (params) {
        parts = at::empty({rows, K + 1, a.C}, x.options().dtype(at::toOpMathType(x.scalar_type())));
        a.parts = parts.data_ptr<opmath_t>();
      }
      kernel<<<dim3(static_cast<unsigned>(columns), static_cast<unsigned>(rows)), S::kThreads, 0, stream>>>(a);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    if (params) {
      const int64_t n = (K + 1) * a.C;
      sum_parts_kernel<scalar_t><<<static_cast<unsigned>(ceil_div(n, kSumX)), dim3(kSumX, kSumY), 0, stream>>>(
          a.parts, rows, a.C, static_cast<int>(K),
          grad_weight.defined() ? grad_weight.data_ptr<scalar_t>() : nullptr,
          grad_bias.defined() ? grad_bias.data_ptr<scalar_t>() : nullptr);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

} // namespace customops::cuda::causal_conv1d_channel_last
