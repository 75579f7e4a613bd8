// causal_conv1d.mamba on CUDA in Mamba's layout ((B, L, C) in memory). The forward loads a tile of steps x
// channels (and the K-1 steps before it) into shared memory with 16-byte accesses, computes it there and stores it
// the same way. The backward: each thread owns a few consecutive channels of one batch row and a run of consecutive
// steps, and walks the run keeping the last K-1 steps in registers, so that every input is read once from memory
// (plus K-1 steps before the run, mostly from L2) and every access is a vector of the thread's channels:
// consecutive threads take consecutive channels, so a warp reads one contiguous span of a step. Per step it
// recomputes the pre-activation, takes the SiLU's derivative, and produces the input gradient K-1 steps behind (the
// steps after s read s); the weight and bias gradients are sums kept in registers over the thread's steps, summed
// over the block's threads in a fixed order into one slice per block row of a float workspace, which a second
// kernel sums over the slices in a fixed order (the same bits every run, no atomics).
#include "kernels/cuda/causal_conv1d/channel_last.h"

#include "kernels/causal_conv1d.h"
#include "kernels/cuda/common/launch.cuh"

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

// The kernels' register budget (launch bounds) and shared memory are sized for kBlock threads; they are launched
// with kThreadsPerBlock, which measured faster on an H100 (finer occupancy steps at their register counts).
constexpr int kBlock = 256, kThreadsPerBlock = 128;

// The backward's channels per thread (V), steps whose loads are issued together (U), and whether the next U
// steps' loads are issued before the current ones are computed (prefetch). Measured on an H100 (bf16, width 4,
// Mamba's shapes), narrower accesses with more threads in flight beat 16-byte ones for the half types: 2 channels
// (4-byte accesses) without prefetch. float and double keep 16-byte accesses with prefetch (not measured).
template <typename scalar_t>
struct Tile {
  static constexpr bool kHalf = sizeof(scalar_t) == 2;
  static constexpr int kWide = static_cast<int>(16 / sizeof(scalar_t));
  static constexpr int kBackwardVec = kHalf ? 2 : kWide, kBackwardSteps = 4;
  static constexpr bool kBackwardPrefetch = !kHalf;
};

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

// The half types' results keep 8 or 11 bits, far under the fast exponential's and division's error; float and
// double take the exact ones.
template <bool kFast>
__device__ __forceinline__ float sigmoid(float z) {
  if constexpr (kFast) {
    return __fdividef(1.f, 1.f + __expf(-z));
  } else {
    return 1.f / (1.f + ::expf(-z));
  }
}
template <bool kFast>
__device__ __forceinline__ double sigmoid(double z) {
  return 1.0 / (1.0 + ::exp(-z));
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
  int64_t steps, runs;  // steps per run, runs per batch row (the last one may be shorter)
  bool silu;
};

// The block's x spans channel vectors, its y runs of steps; a block row of the grid takes its runs in turn.
template <int V>
__device__ __forceinline__ int64_t first_channel() {
  return (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V;
}

// Step s in [-(K-1), L) of row b at channels c0.., in opmath: x, or before t = 0 initial_states (read through
// its strides: K-1 values per run at most) or zeros.
template <int K, int V, typename scalar_t, typename opmath_t>
__device__ __forceinline__ void load_step(const Args<scalar_t>& a, int64_t b, int64_t c0, int64_t s,
                                          opmath_t (&v)[V]) {
  if (s >= 0) {
    const auto p = load<scalar_t, V>(a.x + b * a.xs0 + s * a.xs2 + c0);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = static_cast<opmath_t>(p.v[i]);
  } else if (a.init != nullptr) {
    const scalar_t* init = a.init + b * a.is0 + (K - 1 + s) * a.is2;
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = static_cast<opmath_t>(init[(c0 + i) * a.is1]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = opmath_t(0);
  }
}

// The forward through a shared-memory tile of kTileSteps steps x kTileChannels channels, as Dao's channel-last
// kernel does: a block first issues every 16-byte load of its tile and the K-1 steps before it (independent of one
// another, so that many bytes are in flight), then each thread computes a run of steps of one channel from shared
// memory, and the results go back through the tile and out as 16-byte stores. The per-thread walk of the backward
// moved the forward's bytes at about 40% of a copy's rate; this one re-reads K-1 of every kTileSteps steps.
constexpr int kTileSteps = 64, kTileChannels = 64, kTileThreads = 128;

template <typename scalar_t, int K>
__global__ void __launch_bounds__(kTileThreads) forward_tile_kernel(const Args<scalar_t> a) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  constexpr int kVec = 16 / sizeof(scalar_t), kRowVecs = kTileChannels / kVec, kRows = kTileSteps + K - 1;
  // A vector of padding per row keeps every row 16-byte aligned.
  __shared__ __align__(16) scalar_t tile[kRows][kTileChannels + kVec];
  __shared__ int32_t ids[kRows];
  const int64_t tiles = (a.L + kTileSteps - 1) / kTileSteps;
  const int64_t b = blockIdx.x / tiles, first = (blockIdx.x - b * tiles) * kTileSteps - (K - 1);
  const int64_t c0 = int64_t(blockIdx.y) * kTileChannels;
  const bool has_seq = a.seq != nullptr;
  // Row r holds step first + r; C is a whole number of vectors, so a vector is either all in or all out.
  for (int i = threadIdx.x; i < kRows * kRowVecs; i += kTileThreads) {
    const int r = i / kRowVecs, v = i - r * kRowVecs;
    const int64_t s = first + r, c = c0 + int64_t(v) * kVec;
    Pack<scalar_t, kVec> p;
    if (c < a.C && s >= 0 && s < a.L) {
      p = load<scalar_t, kVec>(a.x + b * a.xs0 + s * a.xs2 + c);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        p.v[j] = c < a.C && s < 0 && a.init != nullptr
                     ? a.init[b * a.is0 + (c + j) * a.is1 + (K - 1 + s) * a.is2] : scalar_t(0);
      }
    }
    store<scalar_t, kVec>(&tile[r][v * kVec], p);
  }
  if (has_seq) {
    for (int r = threadIdx.x; r < kRows; r += kTileThreads) {
      const int64_t s = first + r;
      ids[r] = s >= 0 && s < a.L ? a.seq[b * a.L + s] : -1;  // before t = 0 x is zero: any id will do
    }
  }
  __syncthreads();
  // Thread: channel ch of the tile, steps [s0, s0 + kRun) of it (tile rows s0 + K-1 ..).
  constexpr int kRuns = kTileThreads / kTileChannels, kRun = kTileSteps / kRuns;
  const int ch = threadIdx.x % kTileChannels, s0 = threadIdx.x / kTileChannels * kRun;
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
    if (has_seq) {
      const int32_t own = ids[s0 + s + K - 1];
#pragma unroll
      for (int k = 0; k < K; ++k) acc += ids[s0 + s + k] == own ? w[k] * win[k] : opmath_t(0);
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) acc += w[k] * win[k];
    }
    if (a.silu) acc *= sigmoid<kFast>(acc);
    out[s] = acc;
#pragma unroll
    for (int k = 0; k + 1 < K; ++k) win[k] = win[k + 1];
  }
  __syncthreads();  // every thread has read its inputs: the tile takes the results, row s for step first+K-1+s
#pragma unroll
  for (int s = 0; s < kRun; ++s) tile[s0 + s][ch] = static_cast<scalar_t>(out[s]);
  __syncthreads();
  for (int i = threadIdx.x; i < kTileSteps * kRowVecs; i += kTileThreads) {
    const int r = i / kRowVecs, v = i - r * kRowVecs;
    const int64_t t = first + (K - 1) + r, cc = c0 + int64_t(v) * kVec;
    if (t < a.L && cc < a.C) {
      store<scalar_t, kVec>(a.out + b * a.os0 + t * a.os2 + cc, load<scalar_t, kVec>(&tile[r][v * kVec]));
    }
  }
}

// Each thread: channels c0..c0+V-1, runs of `steps` steps [t0, stop). It walks t from t0 to stop + K-2: at each
// step the gradient before the SiLU, gp(t) (zero past L), and then the gradient of step s = t-(K-1), which steps
// s..t read with taps K-1..0 (only those of s's sequence with seq_idx): grad_x for s in the run, the gradient of
// initial_states for s < 0 (the run at t0 = 0). Windows: xw[j], gw[j], ids[j] hold x, gp and the sequence of step
// t-(K-1)+j; the gradients before t0 are not needed (s >= t0) except before t = 0, where they are zero. The weight
// and bias gradients sum gp(t) times the taps' inputs over the thread's own steps (t < stop), across its runs.
template <typename scalar_t, int K, int V, int U, bool kPrefetch>
__global__ void __launch_bounds__(kBlock) backward_kernel(const Args<scalar_t> a) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr bool kFast = sizeof(scalar_t) == 2;
  const int64_t c0 = first_channel<V>();
  opmath_t dw[K][V], db[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    db[i] = opmath_t(0);
#pragma unroll
    for (int k = 0; k < K; ++k) dw[k][i] = opmath_t(0);
  }
  if (c0 < a.C) {
    opmath_t w[K][V], bias[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
#pragma unroll
      for (int k = 0; k < K; ++k) w[k][i] = static_cast<opmath_t>(a.weight[(c0 + i) * K + k]);
      bias[i] = a.bias != nullptr ? static_cast<opmath_t>(a.bias[c0 + i]) : opmath_t(0);
    }
    const bool has_seq = a.seq != nullptr;
    const int64_t rows = a.B * a.runs;
    for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < rows;
         r += int64_t(gridDim.y) * blockDim.y) {
      const int64_t b = r / a.runs, t0 = (r - b * a.runs) * a.steps;
      const int64_t stop = ::min(t0 + a.steps, a.L), end = stop + (K - 1), in_end = ::min(end, a.L);
      const scalar_t* x = a.x + b * a.xs0 + c0;
      const scalar_t* grad = a.grad + b * a.gs0 + c0;
      scalar_t* dx = a.out != nullptr ? a.out + b * a.os0 + c0 : nullptr;
      const int32_t* seq = has_seq ? a.seq + b * a.L : nullptr;
      opmath_t xw[K - 1][V], gw[K - 1][V];
      int32_t ids[K - 1];
#pragma unroll
      for (int j = 0; j < K - 1; ++j) {
        const int64_t s = t0 - (K - 1) + j;
        load_step<K, V>(a, b, c0, s, xw[j]);
        ids[j] = has_seq && s >= 0 ? seq[s] : 0;
#pragma unroll
        for (int i = 0; i < V; ++i) gw[j][i] = opmath_t(0);
      }
      // With kPrefetch, the loads of the next U steps are issued before the current ones are computed.
      Pack<scalar_t, V> xv[U], gv[U], xn[U], gn[U];
      int32_t sv[U], sn[U];
      const auto fetch = [&](int64_t from, Pack<scalar_t, V>(&xs)[U], Pack<scalar_t, V>(&gs)[U],
                             int32_t(&ss)[U]) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (from + u < in_end) {
            xs[u] = load<scalar_t, V>(x + (from + u) * a.xs2);
            gs[u] = load<scalar_t, V>(grad + (from + u) * a.gs2);
            ss[u] = has_seq ? seq[from + u] : 0;
          }
        }
      };
      if constexpr (kPrefetch) fetch(t0, xn, gn, sn);
      for (int64_t t = t0; t < end; t += U) {
        if constexpr (kPrefetch) {
#pragma unroll
          for (int u = 0; u < U; ++u) xv[u] = xn[u], gv[u] = gn[u], sv[u] = sn[u];
          fetch(t + U, xn, gn, sn);
        } else {
          fetch(t, xv, gv, sv);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t tt = t + u;
          if (tt >= end) break;
          opmath_t cur[V], gp[V];
          int32_t id = 0;
          if (tt < a.L) {
            id = sv[u];
            bool reads[K - 1];
#pragma unroll
            for (int j = 0; j < K - 1; ++j) reads[j] = !has_seq || ids[j] == id;
            const bool own = tt < stop;
#pragma unroll
            for (int i = 0; i < V; ++i) {
              cur[i] = static_cast<opmath_t>(xv[u].v[i]);
              opmath_t taps[K];
#pragma unroll
              for (int j = 0; j < K - 1; ++j) taps[j] = reads[j] ? xw[j][i] : opmath_t(0);
              taps[K - 1] = cur[i];
              opmath_t g = static_cast<opmath_t>(gv[u].v[i]);
              if (a.silu) {
                opmath_t z = bias[i];
#pragma unroll
                for (int k = 0; k < K; ++k) z += w[k][i] * taps[k];
                const opmath_t sig = sigmoid<kFast>(z);
                g *= sig * (opmath_t(1) + z * (opmath_t(1) - sig));
              }
              gp[i] = g;
              if (own) {
                db[i] += g;
#pragma unroll
                for (int k = 0; k < K; ++k) dw[k][i] += g * taps[k];
              }
            }
          } else {
#pragma unroll
            for (int i = 0; i < V; ++i) cur[i] = gp[i] = opmath_t(0);
          }
          // Step s = tt-(K-1) is read by step s+j with tap K-1-j: gw[j] for j < K-1, gp for j = K-1.
          const int64_t s = tt - (K - 1);
          if (s >= t0 ? dx != nullptr : s < 0 && a.dinit != nullptr) {
            bool reads[K];
#pragma unroll
            for (int j = 1; j < K - 1; ++j) reads[j] = !has_seq || ids[j] == ids[0];
            reads[K - 1] = !has_seq || id == ids[0];
            Pack<scalar_t, V> out;
#pragma unroll
            for (int i = 0; i < V; ++i) {
              opmath_t acc = w[K - 1][i] * gw[0][i];
#pragma unroll
              for (int j = 1; j < K - 1; ++j) acc += w[K - 1 - j][i] * (reads[j] ? gw[j][i] : opmath_t(0));
              acc += w[0][i] * (reads[K - 1] ? gp[i] : opmath_t(0));
              out.v[i] = static_cast<scalar_t>(acc);
            }
            if (s >= t0) {
              store<scalar_t, V>(dx + s * a.os2, out);
            } else {
              // Before t = 0 (the run at t0 = 0). With seq_idx no step reads there: zeros.
              scalar_t* dinit = a.dinit + (b * a.C + c0) * (K - 1) + (s + K - 1);
#pragma unroll
              for (int i = 0; i < V; ++i) dinit[i * (K - 1)] = has_seq ? scalar_t(0) : out.v[i];
            }
          }
#pragma unroll
          for (int j = 0; j + 1 < K - 1; ++j) {
            ids[j] = ids[j + 1];
#pragma unroll
            for (int i = 0; i < V; ++i) {
              xw[j][i] = xw[j + 1][i];
              gw[j][i] = gw[j + 1][i];
            }
          }
          ids[K - 2] = id;
#pragma unroll
          for (int i = 0; i < V; ++i) {
            xw[K - 2][i] = cur[i];
            gw[K - 2][i] = gp[i];
          }
        }
      }
    }
  }
  if (a.parts == nullptr) return;
  // The block's rows of threads (blockDim.y of them) share channels: their sums, row by row in order.
  __shared__ opmath_t shared[kBlock * V];
  const int width = blockDim.x * V, tid = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k <= K; ++k) {
#pragma unroll
    for (int i = 0; i < V; ++i) shared[tid * V + i] = k < K ? dw[k][i] : db[i];
    __syncthreads();
    for (int col = tid; col < width; col += blockDim.x * blockDim.y) {
      const int64_t c = int64_t(blockIdx.x) * width + col;
      if (c < a.C) {
        opmath_t sum = shared[col];
        for (int y = 1; y < int(blockDim.y); ++y) sum += shared[y * width + col];
        a.parts[(int64_t(blockIdx.y) * (K + 1) + k) * a.C + c] = sum;
      }
    }
    __syncthreads();
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

// Block (cx, ty): cx threads across channel vectors (a warp where the channels allow), ty across runs. Steps per
// run: the most (up to `most`) that still give a full wave of threads (2048 per multiprocessor), at least
// `fewest`: shorter runs re-read more of the K-1 steps before each one. With `bounded_rows`, the block rows stop at
// about one wave (each thread takes several runs in turn): the backward writes one workspace slice per block row.
struct Shape {
  dim3 grid, block;
  int64_t steps, runs;
};

Shape shape_for(int64_t B, int64_t C, int64_t L, int V, int64_t fewest, int64_t most, bool bounded_rows) {
  Shape s;
  const int64_t vecs = C / V;
  int cx = 1;
  while (cx < 32 && cx < vecs) cx *= 2;
  const int ty = kThreadsPerBlock / cx;
  const int64_t wanted = int64_t(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 2048;
  s.steps = most;
  while (s.steps > fewest && vecs * B * ceil_div(L, s.steps) < wanted) s.steps /= 2;
  s.runs = ceil_div(L, s.steps);
  const int64_t gx = ceil_div(vecs, cx), needed = ceil_div(B * s.runs, ty);
  int64_t gy = std::min<int64_t>(needed, 65535);
  if (bounded_rows) {
    const int64_t cap = std::max<int64_t>(1, ceil_div(wanted, gx * cx * ty));
    gy = std::min(gy, ceil_div(needed, ceil_div(needed, cap)));  // as many runs for every block row
  }
  TORCH_INTERNAL_ASSERT(gx <= int64_t(std::numeric_limits<int32_t>::max()));
  s.grid = dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  s.block = dim3(cx, ty);
  return s;
}

template <typename scalar_t>
Args<scalar_t> args_for(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& seq_idx, const at::Tensor& init, bool silu) {
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
  a.silu = silu;
  return a;
}

template <typename Fn>
void with_width(int64_t K, Fn&& fn) {
  switch (K) {
    case 2: return fn(std::integral_constant<int, 2>{});
    case 3: return fn(std::integral_constant<int, 3>{});
    case 4: return fn(std::integral_constant<int, 4>{});
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
    auto a = args_for<scalar_t>(x, weight, bias, seq_idx, initial_states, silu);
    a.out = out.data_ptr<scalar_t>();
    a.os0 = out.stride(0), a.os2 = out.stride(2);
    with_width(weight.size(1), [&](auto K) {
      const int64_t tiles = a.B * ceil_div(a.L, kTileSteps), columns = ceil_div(a.C, kTileChannels);
      TORCH_CHECK(tiles <= int64_t(std::numeric_limits<int32_t>::max()) && columns <= 65535,
                  "causal_conv1d: x of ", a.B, " rows of ", a.L, " steps and ", a.C, " channels is too large");
      forward_tile_kernel<scalar_t, decltype(K)::value>
          <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(columns)), kTileThreads, 0, stream>>>(a);
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
    auto a = args_for<scalar_t>(x, weight, bias, seq_idx, initial_states, silu);
    a.grad = grad_out.const_data_ptr<scalar_t>();
    a.gs0 = grad_out.stride(0), a.gs2 = grad_out.stride(2);
    if (grad_x.defined()) {
      a.out = grad_x.data_ptr<scalar_t>();
      a.os0 = grad_x.stride(0), a.os2 = grad_x.stride(2);
    }
    if (grad_initial_states.defined() && grad_initial_states.numel() > 0) {
      a.dinit = grad_initial_states.data_ptr<scalar_t>();
    }
    const bool params = grad_weight.defined() || grad_bias.defined();
    at::Tensor parts;
    Shape s;
    with_width(K, [&](auto width) {
      constexpr int kV = Tile<scalar_t>::kBackwardVec, kU = Tile<scalar_t>::kBackwardSteps;
      auto launch = [&](auto kernel, int vec) {
        s = shape_for(a.B, a.C, a.L, vec, 64, 128, params);
        a.steps = s.steps, a.runs = s.runs;
        if (params) {
          parts = at::empty({int64_t(s.grid.y), K + 1, a.C}, x.options().dtype(at::toOpMathType(x.scalar_type())));
          a.parts = parts.data_ptr<opmath_t>();
        }
        kernel<<<s.grid, s.block, 0, stream>>>(a);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      };
      launch(backward_kernel<scalar_t, decltype(width)::value, kV, kU, Tile<scalar_t>::kBackwardPrefetch>, kV);
    });
    if (params) {
      const int64_t n = (K + 1) * a.C;
      sum_parts_kernel<scalar_t><<<static_cast<unsigned>(ceil_div(n, kSumX)), dim3(kSumX, kSumY), 0, stream>>>(
          a.parts, int64_t(s.grid.y), a.C, static_cast<int>(K),
          grad_weight.defined() ? grad_weight.data_ptr<scalar_t>() : nullptr,
          grad_bias.defined() ? grad_bias.data_ptr<scalar_t>() : nullptr);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

} // namespace customops::cuda::causal_conv1d_channel_last
