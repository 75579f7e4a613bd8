// Elementwise map over dense device memory: out[i] = op(in[i]...).
// Memory-bound, so each thread keeps kUnroll 16-byte loads per input in flight
// before it computes; misaligned pointers and the last n % kVec elements take a
// one-element-per-load path.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>
#include <utility>

namespace customops::cuda {

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

constexpr int kMapThreads = 256;
constexpr int kMapUnroll = 4;

template <typename scalar_t, int kVec, typename Op, size_t... K>
__device__ __forceinline__ scalar_t apply_op(const Op& op, const Pack<scalar_t, kVec> (&vals)[sizeof...(K)],
                                             int j, std::index_sequence<K...>) {
  using opmath_t = at::opmath_type<scalar_t>;
  return static_cast<scalar_t>(op(static_cast<opmath_t>(vals[K].v[j])...));
}

template <typename scalar_t, int kVec, typename Op, typename... In>
__global__ void __launch_bounds__(kMapThreads)
    map_kernel(scalar_t* out, int64_t n_packs, Op op, In... in) {
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
      P r;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        r.v[j] = apply_op<scalar_t, kVec>(op, vals[u], j, std::make_index_sequence<kInputs>{});
      }
      reinterpret_cast<P*>(out)[p] = r;
    }
  }
}

template <int kVec, typename scalar_t, typename Op, typename... In>
void launch_map(scalar_t* out, int64_t n_packs, const Op& op, In... in) {
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

// out and every input: n elements of dense memory laid out alike. Runs on the
// current stream of the current device (callers hold a CUDAGuard).
template <typename scalar_t, typename Op, typename... In>
void map_dense(scalar_t* out, int64_t n, const Op& op, const In*... in) {
  if (n == 0) {
    return;
  }
  constexpr int kVec = 16 / sizeof(scalar_t);
  const bool vectorizable = aligned16(out) && (aligned16(in) && ...);
  const int64_t head = vectorizable ? n / kVec * kVec : 0;
  if (head > 0) {
    launch_map<kVec>(out, head / kVec, op, in...);
  }
  if (head < n) {
    launch_map<1>(out + head, n - head, op, (in + head)...);
  }
}

} // namespace customops::cuda
