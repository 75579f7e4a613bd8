#include "kernels/causal_conv1d.h"
#include "kernels/cuda/common/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include "kernels/cuda/common/device_guard.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace customops::cuda {
namespace {

using causal_conv1d_impl::kMaxWidth;
using launch::kThreads;

constexpr int kPerThread = 4;
constexpr int kTile = kThreads * kPerThread;  // outputs of one row per block

// out[t] = bias + sum_j tap_j * in[t + j + shift] over one row, in read as 0
// outside [0, L): the forward (tap_j = weight[j], shift = -(K-1)) and, with
// the taps reversed and shift 0, the input gradient. A block stages its tile
// of the row and the K-1 values beside it in shared memory, so each input is
// read from memory once; thread i computes outputs i, i + kThreads, ..., so
// that a warp's shared-memory reads and global stores are consecutive.
template <typename scalar_t, bool kReverse>
__global__ void __launch_bounds__(kThreads) filter_kernel(const scalar_t* __restrict__ in,
                                                          const scalar_t* __restrict__ weight,
                                                          const scalar_t* __restrict__ bias, scalar_t* __restrict__ out,
                                                          int64_t C, int64_t L, int K, int64_t tiles_per_row) {
  using opmath_t = at::opmath_type<scalar_t>;
  __shared__ opmath_t staged[kTile + kMaxWidth - 1];
  const int64_t row = blockIdx.x / tiles_per_row;
  const int64_t t0 = (blockIdx.x % tiles_per_row) * int64_t(kTile);
  const int64_t c = row % C;
  const scalar_t* src = in + row * L;
  const int64_t first = kReverse ? t0 : t0 - (K - 1);
  for (int i = threadIdx.x; i < kTile + K - 1; i += kThreads) {
    const int64_t t = first + i;
    staged[i] = t >= 0 && t < L ? static_cast<opmath_t>(src[t]) : opmath_t(0);
  }
  opmath_t taps[kMaxWidth];
#pragma unroll
  for (int j = 0; j < kMaxWidth; ++j) {
    taps[j] = j < K ? static_cast<opmath_t>(weight[c * K + (kReverse ? K - 1 - j : j)]) : opmath_t(0);
  }
  const opmath_t b = bias != nullptr ? static_cast<opmath_t>(bias[c]) : opmath_t(0);
  __syncthreads();
#pragma unroll
  for (int p = 0; p < kPerThread; ++p) {
    const int i = threadIdx.x + p * kThreads;
    if (t0 + i >= L) break;
    opmath_t acc = b;
#pragma unroll
    for (int j = 0; j < kMaxWidth; ++j) {
      if (j < K) acc += taps[j] * staged[i + j];
    }
    out[row * L + t0 + i] = static_cast<scalar_t>(acc);
  }
}

template <typename scalar_t, bool kReverse>
void launch_filter(const scalar_t* in, const scalar_t* weight, const scalar_t* bias, scalar_t* out, int64_t rows,
                   int64_t C, int64_t L, int64_t K) {
  const int64_t tiles = (L + kTile - 1) / kTile, blocks = rows * tiles;
  TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "customops::causal_conv1d: too many rows (", rows,
              ") of length ", L);
  filter_kernel<scalar_t, kReverse><<<static_cast<unsigned>(blocks), kThreads, 0,
                                      at::cuda::getCurrentCUDAStream()>>>(in, weight, bias, out, C, L,
                                                                          static_cast<int>(K), tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The weight and bias gradients of channel c: sums over (b, t) of g[b, c, t]
// times x[b, c, t - (K-1) + k] (k < K) and times 1 (the bias). Block (c, s)
// sums the s-th of `splits` equal runs of the B*L steps in registers, then
// over its threads in a fixed order (shuffles, then the warps in turn). One
// run: the block writes the gradients; several: it writes its K+1 partial
// sums, which finish_kernel adds up in order. No atomics, so the same bits
// every run.
template <typename scalar_t, int K>
__global__ void __launch_bounds__(kThreads) weight_grad_kernel(const scalar_t* __restrict__ g,
                                                               const scalar_t* __restrict__ x,
                                                               at::opmath_type<scalar_t>* __restrict__ partial,
                                                               scalar_t* __restrict__ dw, scalar_t* __restrict__ db,
                                                               int64_t B, int64_t C, int64_t L, int64_t run,
                                                               int splits) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr int kSums = K + 1;
  constexpr int kWarps = kThreads / 32;
  __shared__ opmath_t warp_sums[kWarps][kSums];
  const int64_t c = blockIdx.x / splits;
  const int64_t split = blockIdx.x % splits;
  const int64_t begin = split * run, end = std::min(begin + run, B * L);
  opmath_t acc[kSums] = {};
  int64_t i = begin + threadIdx.x;
  int64_t b = i / L, t = i - b * L;  // stepped along below: one division per thread
  for (; i < end; i += kThreads) {
    const int64_t base = (b * C + c) * L;
    const opmath_t gv = static_cast<opmath_t>(g[base + t]);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t s = t - (K - 1) + k;
      if (s >= 0) acc[k] += gv * static_cast<opmath_t>(x[base + s]);
    }
    acc[K] += gv;
    t += kThreads;
    while (t >= L && L > 0) {
      t -= L;
      ++b;
    }
  }
#pragma unroll
  for (int k = 0; k < kSums; ++k) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < kSums; ++k) warp_sums[warp][k] = acc[k];
  }
  __syncthreads();
  if (threadIdx.x >= kSums) return;
  const int k = threadIdx.x;
  opmath_t sum = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) sum += warp_sums[w][k];
  if (partial != nullptr) {
    partial[blockIdx.x * kSums + k] = sum;
  } else if (k < K) {
    if (dw != nullptr) dw[c * K + k] = static_cast<scalar_t>(sum);
  } else if (db != nullptr) {
    db[c] = static_cast<scalar_t>(sum);
  }
}

// Channel c's K+1 sums from its `splits` partial sums, added in order.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) finish_kernel(const at::opmath_type<scalar_t>* __restrict__ partial,
                                                          scalar_t* __restrict__ dw, scalar_t* __restrict__ db,
                                                          int64_t C, int K, int splits) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t idx = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (idx >= C * (K + 1)) return;
  const int64_t c = idx / (K + 1);
  const int k = static_cast<int>(idx % (K + 1));
  opmath_t sum = 0;
  for (int s = 0; s < splits; ++s) sum += partial[(c * splits + s) * (K + 1) + k];
  if (k < K) {
    if (dw != nullptr) dw[c * K + k] = static_cast<scalar_t>(sum);
  } else if (db != nullptr) {
    db[c] = static_cast<scalar_t>(sum);
  }
}

template <typename scalar_t, int K>
void launch_weight_grad(const causal_conv1d_impl::Plan& plan, scalar_t* dw, scalar_t* db) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t B = plan.B, C = plan.C, L = plan.L, steps = B * L;
  // Enough blocks to fill the device: a few per SM, but no run shorter than 8 steps a thread.
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t want = (4 * sms + C - 1) / C, most = std::max<int64_t>(1, steps / (8 * kThreads));
  const int splits = static_cast<int>(std::clamp<int64_t>(want, 1, std::min<int64_t>(most, 1024)));
  const int64_t run = (steps + splits - 1) / splits;
  TORCH_CHECK(C * splits <= std::numeric_limits<int32_t>::max(), "customops::causal_conv1d_backward: too many "
              "channels (", C, ")");
  const auto stream = at::cuda::getCurrentCUDAStream();
  const scalar_t* g = plan.grad.const_data_ptr<scalar_t>();
  const scalar_t* x = plan.x.const_data_ptr<scalar_t>();
  at::Tensor partial;
  if (splits > 1) {
    partial = at::empty({C * splits * (K + 1)}, plan.x.options().dtype(at::toOpMathType(plan.x.scalar_type())));
  }
  opmath_t* p = splits > 1 ? partial.mutable_data_ptr<opmath_t>() : nullptr;
  weight_grad_kernel<scalar_t, K><<<static_cast<unsigned>(C * splits), kThreads, 0, stream>>>(g, x, p, dw, db, B, C,
                                                                                               L, run, splits);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (splits > 1) {
    finish_kernel<scalar_t><<<launch::blocks_for(C * (K + 1)), kThreads, 0, stream>>>(p, dw, db, C, K, splits);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

template <typename scalar_t>
void weight_grad(const causal_conv1d_impl::Plan& plan, scalar_t* dw, scalar_t* db) {
  switch (plan.K) {
    case 1: return launch_weight_grad<scalar_t, 1>(plan, dw, db);
    case 2: return launch_weight_grad<scalar_t, 2>(plan, dw, db);
    case 3: return launch_weight_grad<scalar_t, 3>(plan, dw, db);
    case 4: return launch_weight_grad<scalar_t, 4>(plan, dw, db);
    case 5: return launch_weight_grad<scalar_t, 5>(plan, dw, db);
    case 6: return launch_weight_grad<scalar_t, 6>(plan, dw, db);
    case 7: return launch_weight_grad<scalar_t, 7>(plan, dw, db);
    case 8: return launch_weight_grad<scalar_t, 8>(plan, dw, db);
    default: TORCH_INTERNAL_ASSERT(false, "causal_conv1d: width ", plan.K, " past kMaxWidth");
  }
}
static_assert(kMaxWidth == 8, "weight_grad instantiates the widths 1 to kMaxWidth");

} // namespace

at::Tensor causal_conv1d(const at::Tensor& x_in, const at::Tensor& weight_in, const std::optional<at::Tensor>& bias) {
  // The plan checks the devices before anything runs; the guard is for the launch.
  const auto plan = causal_conv1d_impl::plan_forward(x_in, weight_in, bias);
  const KernelGuard guard(x_in.device());
  if (plan.out.numel() == 0) return plan.out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "causal_conv1d_cuda", [&] {
    launch_filter<scalar_t, false>(plan.x.const_data_ptr<scalar_t>(), plan.weight.const_data_ptr<scalar_t>(),
                                   plan.bias.defined() ? plan.bias.const_data_ptr<scalar_t>() : nullptr,
                                   plan.out.data_ptr<scalar_t>(), plan.B * plan.C, plan.C, plan.L, plan.K);
  });
  return plan.out;
}

causal_conv1d_impl::Grads causal_conv1d_backward(const at::Tensor& grad_in, const at::Tensor& x_in,
                                                 const at::Tensor& weight_in, std::array<bool, 3> output_mask) {
  const auto plan = causal_conv1d_impl::plan_backward(grad_in, x_in, weight_in, output_mask);
  const KernelGuard guard(x_in.device());
  const at::Tensor &gx = plan.grad_x, &gw = plan.grad_weight, &gb = plan.grad_bias;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, plan.x.scalar_type(), "causal_conv1d_backward_cuda", [&] {
    if (gx.defined() && gx.numel() > 0) {
      launch_filter<scalar_t, true>(plan.grad.const_data_ptr<scalar_t>(), plan.weight.const_data_ptr<scalar_t>(),
                                    nullptr, gx.data_ptr<scalar_t>(), plan.B * plan.C, plan.C, plan.L, plan.K);
    }
    if (gw.defined() || gb.defined()) {
      scalar_t* dw = gw.defined() ? gw.data_ptr<scalar_t>() : nullptr;
      scalar_t* db = gb.defined() ? gb.data_ptr<scalar_t>() : nullptr;
      if (plan.B * plan.L == 0) {  // sums over nothing
        if (dw) gw.zero_();
        if (db) gb.zero_();
      } else if (plan.C > 0) {
        weight_grad<scalar_t>(plan, dw, db);
      }
    }
  });
  return plan.result();
}

} // namespace customops::cuda
