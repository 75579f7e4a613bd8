// Elementwise map over dense device memory: out[k][i] = op(in[i]...)[k] for
// each of the op's K results.
// Memory-bound, so each thread keeps kUnroll 16-byte loads per input in flight
// before it computes; misaligned pointers and the last n % kVec elements take a
// one-element-per-load path.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <array>
#include <cstdint>
#include <limits>
#include <utility>

namespace customops::cuda {

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

constexpr int kMapThreads = 256;
constexpr int kMapUnroll = 4;

template <typename scalar_t, int kVec, typename Op, size_t... K>
__device__ __forceinline__ auto apply_op(const Op& op, const Pack<scalar_t, kVec> (&vals)[sizeof...(K)], int j,
                                         std::index_sequence<K...>) {
  using opmath_t = at::opmath_type<scalar_t>;
  return op(static_cast<opmath_t>(vals[K].v[j])...);
}

// Output pointers, by value into the kernel.
template <typename scalar_t, size_t K>
struct Outputs {
  scalar_t* p[K];
};

template <typename scalar_t, int kVec, size_t kOut, typename Op, typename... In>
__global__ void __launch_bounds__(kMapThreads)
    map_kernel(Outputs<scalar_t, kOut> out, int64_t n_packs, Op op, In... in) {
  using P = Pack<scalar_t, kVec>;
  constexpr size_t kInputs = sizeof...(In);
  const scalar_t* inputs[kInputs] = {in...};
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kMapThreads * kMapUnroll + threadIdx.x;

  P vals[kMapUnroll][kInputs];
#pragma unroll
  for (int u = 0; u < kMapUnroll; ++u) {
    const int64_t p = first + static_cast<int64_t>(u) * kMapThreads;
    if (p < n_packs) {
#pragma unroll
      for (size_t k = 0; k < kInputs; ++k) {
        vals[u][k] = reinterpret_cast<const P*>(inputs[k])[p];
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kMapUnroll; ++u) {
    const int64_t p = first + static_cast<int64_t>(u) * kMapThreads;
    if (p < n_packs) {
      P r[kOut];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const auto v = apply_op<scalar_t, kVec>(op, vals[u], j, std::make_index_sequence<kInputs>{});
#pragma unroll
        for (size_t k = 0; k < kOut; ++k) {
          r[k].v[j] = static_cast<scalar_t>(v[k]);
        }
      }
#pragma unroll
      for (size_t k = 0; k < kOut; ++k) {
        reinterpret_cast<P*>(out.p[k])[p] = r[k];
      }
    }
  }
}

template <int kVec, typename scalar_t, size_t kOut, typename Op, typename... In>
void launch_map(Outputs<scalar_t, kOut> out, int64_t n_packs, const Op& op, In... in) {
  constexpr int64_t per_block = int64_t(kMapThreads) * kMapUnroll;
  const int64_t blocks = (n_packs + per_block - 1) / per_block;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "customops: tensor too large for one launch");
  map_kernel<scalar_t, kVec><<<static_cast<unsigned>(blocks), kMapThreads, 0,
                               at::cuda::getCurrentCUDAStream()>>>(out, n_packs, op, in...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Every output and input: n elements of dense memory laid out alike. `op` takes
// opmath_type<scalar_t> values and returns K of them (pw::Values). Runs on the
// current stream of the current device (callers hold a CUDAGuard).
template <typename scalar_t, size_t K, typename Op, typename... In>
void map_dense(const std::array<scalar_t*, K>& out, int64_t n, const Op& op, const In*... in) {
  if (n == 0) {
    return;
  }
  constexpr int kVec = 16 / sizeof(scalar_t);
  bool vectorizable = (aligned16(in) && ...);
  Outputs<scalar_t, K> head_out, tail_out;
  for (size_t k = 0; k < K; ++k) {
    vectorizable = vectorizable && aligned16(out[k]);
    head_out.p[k] = out[k];
  }
  const int64_t head = vectorizable ? n / kVec * kVec : 0;
  for (size_t k = 0; k < K; ++k) {
    tail_out.p[k] = out[k] + head;
  }
  if (head > 0) {
    launch_map<kVec>(head_out, head / kVec, op, in...);
  }
  if (head < n) {
    launch_map<1>(tail_out, n - head, op, (in + head)...);
  }
}

} // namespace customops::cuda
