// One kernel of about 4 us where ATen took three (the sum over parts, the rounding, the layout), its sum alone
// 11 us on an H100 for the 132 parts of ResNeXt's 256-channel layer. Few parts (the implicit GEMM's batch chunks)
// over many elements take a thread an element instead: blocks of 32 elements, 8 segments each, left most of
// their threads idle there (256 channels 3x3, 2 parts: 13 us more than ATen's three kernels).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/conv2d/partials.h"

namespace customops::cuda {
namespace {

constexpr int kSumColumns = 32, kSumSegments = 8;

// Element e of a part is (i0, i1, i2, i3) of dims whose three inner sizes are d1, d2, d3; o0..o3 are those dims'
// strides in the output. 32-bit divisions: a filter has fewer than 2^31 elements.
__device__ __forceinline__ int64_t offset(int e, int d1, int d2, int d3, int64_t o0, int64_t o1, int64_t o2,
                                          int64_t o3) {
  const int i3 = e % d3, i2 = e / d3 % d2, i1 = e / d3 / d2 % d1, i0 = e / d3 / d2 / d1;
  return i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3;
}

// Thread segment j adds parts j, j + kSumSegments, ...; the block adds its segments in order. kVec consecutive
// elements a thread: 16-byte loads where n allows (H100, timed right after the parts were written, as they are:
// 132 parts of ResNeXt's 256-channel filter 15.1 -> 12.4 us, 128 of a 64 x 64 x 3 x 3 filter 6.9 -> 6.2 us; the
// same at 4.7 and 151 MB).
template <typename T, int kVec>
__global__ void __launch_bounds__(kSumColumns * kSumSegments)
    sum_partials(const float* __restrict__ partial, int parts, int64_t n, int d1, int d2, int d3, int64_t o0,
                 int64_t o1, int64_t o2, int64_t o3, T* __restrict__ out) {
  using Vec = std::conditional_t<kVec == 4, float4, float>;
  __shared__ Vec segments[kSumSegments][kSumColumns];
  const int column = threadIdx.x % kSumColumns, segment = threadIdx.x / kSumColumns;
  const int64_t e = (blockIdx.x * int64_t(kSumColumns) + column) * kVec;
  const auto add = [](Vec& a, Vec b) {
    if constexpr (kVec == 4) {
      a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
    } else {
      a += b;
    }
  };
  Vec sum{};
  if (e < n) {
#pragma unroll 4
    for (int part = segment; part < parts; part += kSumSegments) {
      add(sum, *reinterpret_cast<const Vec*>(partial + part * n + e));
    }
  }
  segments[segment][column] = sum;
  __syncthreads();
  if (segment == 0 && e < n) {
    Vec total{};
#pragma unroll
    for (int j = 0; j < kSumSegments; ++j) add(total, segments[j][column]);
    const float* lanes = reinterpret_cast<const float*>(&total);
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[offset(int(e) + i, d1, d2, d3, o0, o1, o2, o3)] = static_cast<T>(lanes[i]);
  }
}

// The same with a thread per element adding the parts in order; kSameOrder: the output's memory order is the
// parts' (the common case: a channels_last weight for the implicit GEMM's KRSC sums, a contiguous one for KCRS),
// element e at offset e, no divisions.
template <typename T, bool kSameOrder>
__global__ void sum_few_partials(const float* __restrict__ partial, int parts, int64_t n, int d1, int d2, int d3,
                                 int64_t o0, int64_t o1, int64_t o2, int64_t o3, T* __restrict__ out) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    float total = 0.f;
    for (int part = 0; part < parts; ++part) total += partial[part * n + e];
    out[kSameOrder ? e : offset(int(e), d1, d2, d3, o0, o1, o2, o3)] = static_cast<T>(total);
  }
}

constexpr int kFewParts = 16;

} // namespace

at::Tensor sum_weight_partials(const at::Tensor& partial, const at::Tensor& weight, PartialLayout layout) {
  at::Tensor grad_weight = at::empty(weight.sizes(), weight.options().memory_format(weight.suggest_memory_format()));
  if (grad_weight.numel() == 0) return grad_weight;
  const int64_t n = grad_weight.numel();
  TORCH_CHECK(partial.scalar_type() == at::kFloat && partial.is_contiguous() && partial.numel() % n == 0,
              "customops::conv2d: expected dense float32 partial sums of whole filters");
  TORCH_CHECK(n <= std::numeric_limits<int32_t>::max(), "customops::conv2d: a filter of ", n,
              " elements is past the weight-gradient sum's 32-bit indexing");
  const auto& gw = grad_weight;
  // The part's dims in memory order, with the output's stride for each.
  const bool krsc = layout == PartialLayout::kKRSC;
  const int d1 = int(weight.size(krsc ? 2 : 1)), d2 = int(weight.size(krsc ? 3 : 2)),
            d3 = int(weight.size(krsc ? 1 : 3));
  const int64_t o1 = gw.stride(krsc ? 2 : 1), o2 = gw.stride(krsc ? 3 : 2), o3 = gw.stride(krsc ? 1 : 3);
  const int parts = int(partial.numel() / n);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, weight.scalar_type(), "conv2d_weight_grad_sum", [&] {
    if (parts <= kFewParts) {
      constexpr int kThreads = 256;
      const int64_t most = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 8;
      const bool same_order = o3 == 1 && o2 == d3 && o1 == int64_t(d2) * d3 && gw.stride(0) == int64_t(d1) * d2 * d3;
      const auto kernel = same_order ? sum_few_partials<scalar_t, true> : sum_few_partials<scalar_t, false>;
      kernel<<<unsigned(std::min((n + kThreads - 1) / kThreads, most)), kThreads, 0, stream>>>(
          partial.const_data_ptr<float>(), parts, n, d1, d2, d3, gw.stride(0), o1, o2, o3,
          grad_weight.mutable_data_ptr<scalar_t>());
    } else {
      // 16-byte loads where every part starts 16-byte aligned.
      const bool wide = n % 4 == 0 && reinterpret_cast<uintptr_t>(partial.const_data_ptr()) % 16 == 0;
      const int vec = wide ? 4 : 1;
      const auto kernel = wide ? sum_partials<scalar_t, 4> : sum_partials<scalar_t, 1>;
      kernel<<<unsigned((n + int64_t(kSumColumns) * vec - 1) / (int64_t(kSumColumns) * vec)), kSumColumns * kSumSegments,
               0, stream>>>(partial.const_data_ptr<float>(), parts, n, d1, d2, d3, gw.stride(0), o1, o2, o3,
                            grad_weight.mutable_data_ptr<scalar_t>());
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_weight;
}

} // namespace customops::cuda
