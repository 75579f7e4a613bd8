// Pieces shared by the NCHW and NHWC depthwise_conv2d kernels: the taps of a
// strided, dilated window that read one source position (the gathering input
// gradients), and the last step of the weight gradients' fixed-order sums.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>

#include <algorithm>
#include <tuple>

#include "kernels/cuda/common/launch.cuh"

namespace customops::cuda {

// Along one dimension, tap i reads source position pos when
// pos + pad - i * d is a whole multiple of the stride s, and then feeds output
// (pos + pad - i * d) / s. The walk visits i = 0, 1, ... keeping that quotient
// and remainder up to date, so a gather divides once per position, not twice
// per tap: the 64-bit divisions of the per-tap test were most of the strided
// input gradient's time (3.3 ms for 128x96x112x112 bf16, 3x3, stride 2 on an
// H100, where cuDNN took 0.58 ms). Needs pos + pad >= 0.
struct TapWalk {
  int q, r;    // pos + pad - i * d == q * s + r, 0 <= r < s
  int dq, dr;  // d == dq * s + dr
  int s;

  __device__ __forceinline__ TapWalk(int pos_plus_pad, int stride, int dilation)
      : q(pos_plus_pad / stride),
        r(pos_plus_pad - pos_plus_pad / stride * stride),
        dq(dilation / stride),
        dr(dilation - dilation / stride * stride),
        s(stride) {}

  // The next tap's position.
  __device__ __forceinline__ void next() {
    q -= dq;
    r -= dr;
    if (r < 0) {
      r += s;
      --q;
    }
  }

  // The tap reads pos, for an output extent of `out`; its output is q.
  __device__ __forceinline__ bool hits(int out) const { return r == 0 && q < out; }

  // This tap and every later one land before output 0.
  __device__ __forceinline__ bool past() const { return q < 0; }
};

namespace depthwise_detail {

// kSumRows threads of a block column add every kSumRows-th part of one
// element (so the loads of a warp are 32 consecutive elements), then the
// column's sums are added in row order: a fixed order, whatever the grid.
// (One thread an element, adding hundreds of parts in turn, took about 20 us
// for a 3x3 weight gradient of 144 channels from 264 parts on an H100.)
constexpr int kSumRows = 8;

// One column of 32 elements: the threads of row y (of kSumRows) add parts
// y, y + kSumRows, ..., then row 0 adds the rows in order. Parts are read
// through L2 (__ldcg): a folding kernel reads what other blocks of the same
// launch wrote.
template <typename opmath_t, typename scalar_t>
__device__ __forceinline__ void sum_column(const opmath_t* partial, int64_t parts, int64_t n, int64_t column, int x,
                                           int y, opmath_t (*s_sum)[32], scalar_t* __restrict__ out) {
  const int64_t i = column * 32 + x;
  opmath_t sum = 0;
  if (i < n) {
    for (int64_t k = y; k < parts; k += kSumRows) sum += __ldcg(partial + k * n + i);
  }
  s_sum[y][x] = sum;
  __syncthreads();
  if (y == 0 && i < n) {
#pragma unroll
    for (int r = 1; r < kSumRows; ++r) sum += s_sum[r][x];
    out[i] = static_cast<scalar_t>(sum);
  }
  __syncthreads();  // s_sum is written again by the next column
}

template <typename opmath_t, typename scalar_t>
__global__ void __launch_bounds__(32 * kSumRows) sum_parts_kernel(const opmath_t* __restrict__ partial,
                                                                  int64_t parts, int64_t n,
                                                                  scalar_t* __restrict__ out) {
  __shared__ opmath_t s_sum[kSumRows][32];
  sum_column(partial, parts, n, blockIdx.x, threadIdx.x, threadIdx.y, s_sum, out);
}

// The same sums, made by the (cooperatively launched, 32 * kSumRows threads a
// block) kernel that wrote the parts, after a grid-wide barrier: one launch
// where sum_parts needs a second, and the same order, so the same bits.
template <typename opmath_t, typename scalar_t>
__device__ __forceinline__ void fold_parts(const opmath_t* partial, int64_t parts, int64_t n,
                                           scalar_t* __restrict__ out) {
  cooperative_groups::this_grid().sync();
  __shared__ opmath_t s_sum[kSumRows][32];
  for (int64_t column = blockIdx.x; column * 32 < n; column += gridDim.x) {
    sum_column(partial, parts, n, column, threadIdx.x % 32, threadIdx.x / 32, s_sum, out);
  }
}

} // namespace depthwise_detail

// The weight gradient, of the given sizes, from the blocks' partial sums
// (parts, ...): added in a fixed order (sum_parts_kernel) and rounded to `dtype` in
// one launch. (at::sum then a cast are two more operators on the host, and in a
// host-bound training step the host's time is the step's.)
inline at::Tensor sum_parts(const at::Tensor& partial, at::ScalarType dtype, at::IntArrayRef sizes,
                            at::Tensor out = at::Tensor()) {
  if (!out.defined()) out = at::empty(sizes, partial.options().dtype(dtype));
  const int64_t parts = partial.size(0), n = out.numel();
  if (n == 0) return out;
  if (parts == 0) return out.zero_();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "depthwise_sum_parts", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto blocks = static_cast<unsigned>((n + 31) / 32);  // n: a weight's elements
    depthwise_detail::sum_parts_kernel<opmath_t, scalar_t>
        <<<blocks, dim3(32, depthwise_detail::kSumRows), 0, at::cuda::getCurrentCUDAStream()>>>(
            partial.const_data_ptr<opmath_t>(), parts, n, out.data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

// Launches a weight-gradient kernel that folds its own parts (fold_parts) where
// its blocks are all resident at once, as a grid-wide barrier needs, and one
// block each has a whole item of work (the parts' and the sums' columns of n
// elements). Returns false otherwise, or where the device takes no cooperative
// launches: the caller then launches the kernel without folding and sums the
// parts with sum_parts. Larger grids are not folded: a grid capped at the
// resident blocks, looping over the items, took 1.1-1.5x the two launches' GPU
// time on the zoo's float32 NCHW weight gradients (H200, batch 128), against
// the ~3 us of a second launch; where everything fits at once (small layers,
// whose steps are bound by the host's launches) the launch saved is the gain.
template <typename... Params, typename... Args>
bool launch_folding(void (*kernel)(Params...), int64_t work_blocks, int64_t n, size_t smem, cudaStream_t stream,
                    Args&&... args) {
  constexpr int threads = 32 * depthwise_detail::kSumRows;
  if (!at::cuda::getCurrentDeviceProperties()->cooperativeLaunch) return false;
  const int64_t grid = std::max<int64_t>({work_blocks, (n + 31) / 32, 1});
  if (grid > launch::resident_blocks(kernel, threads, int64_t(smem))) return false;
  std::tuple<Params...> typed{std::forward<Args>(args)...};
  std::apply(
      [&](auto&... arg) {
        void* argv[] = {static_cast<void*>(&arg)...};
        C10_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(unsigned(grid)),
                                                   dim3(threads), argv, smem, stream));
      },
      typed);
  return true;
}

} // namespace customops::cuda
