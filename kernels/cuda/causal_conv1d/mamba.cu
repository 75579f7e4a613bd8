// causal_conv1d.mamba on CUDA: the training call with Mamba's arguments (a fused SiLU, seq_idx, initial_states),
// x, initial_states and grad_out read in place through their strides, the results in x's layout. Mamba's own
// layout (channel-last, 16-byte vectors of channels, widths 2 to 4) takes the kernels of channel_last.cu, which
// walk runs of steps with the filter's window in registers. Every other layout and width takes the generic kernels
// here: one thread per output; the weight and bias gradients one block per channel, reduced in a fixed order (the
// same bits every run).
#include "kernels/causal_conv1d.h"
#include "kernels/cuda/causal_conv1d/channel_last.h"
#include "kernels/cuda/common/device_guard.h"
#include "kernels/cuda/common/launch.cuh"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

namespace customops::cuda {
namespace {

using launch::kThreads;

// The arguments every kernel reads, with strides in elements.
template <typename scalar_t>
struct Rows {
  const scalar_t* x;
  int64_t xs0, xs1, xs2;
  const scalar_t* init;  // nullptr: zeros before t = 0
  int64_t is0, is1, is2;
  const scalar_t* weight;  // (C, K) contiguous
  const scalar_t* bias;    // nullptr where none
  const int32_t* seq;      // (B, L) contiguous, nullptr where none
  const scalar_t* grad;    // the backward's grad_out
  int64_t gs0, gs1, gs2;
  int64_t B, C, L;
  int K;
  bool silu;
};

// x at step s of row (b, c), s in [-(K-1), L): before t = 0, initial_states or zeros.
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
__device__ opmath_t step(const Rows<scalar_t>& a, int64_t b, int64_t c, int64_t s) {
  if (s >= 0) return static_cast<opmath_t>(a.x[b * a.xs0 + c * a.xs1 + s * a.xs2]);
  if (a.init == nullptr) return opmath_t(0);
  return static_cast<opmath_t>(a.init[b * a.is0 + c * a.is1 + (a.K - 1 + s) * a.is2]);
}

// Whether step t reads step s: always without seq_idx; with it, only an earlier step of its own sequence.
template <typename scalar_t>
__device__ bool reads(const Rows<scalar_t>& a, int64_t b, int64_t t, int64_t s) {
  if (a.seq == nullptr) return true;
  return s >= 0 && a.seq[b * a.L + s] == a.seq[b * a.L + t];
}

template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
__device__ opmath_t pre_activation(const Rows<scalar_t>& a, int64_t b, int64_t c, int64_t t) {
  opmath_t acc = a.bias != nullptr ? static_cast<opmath_t>(a.bias[c]) : opmath_t(0);
  for (int k = 0; k < a.K; ++k) {
    const int64_t s = t - (a.K - 1) + k;
    if (reads(a, b, t, s)) acc += static_cast<opmath_t>(a.weight[c * a.K + k]) * step(a, b, c, s);
  }
  return acc;
}

// grad_out at step t through the SiLU: d silu(z) / dz = s (1 + z (1 - s)), s = sigmoid(z).
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
__device__ opmath_t grad_pre(const Rows<scalar_t>& a, int64_t b, int64_t c, int64_t t) {
  opmath_t g = static_cast<opmath_t>(a.grad[b * a.gs0 + c * a.gs1 + t * a.gs2]);
  if (a.silu) {
    const opmath_t z = pre_activation(a, b, c, t);
    const opmath_t sig = opmath_t(1) / (opmath_t(1) + ::exp(-z));
    g *= sig * (opmath_t(1) + z * (opmath_t(1) - sig));
  }
  return g;
}

// (b, c, t) of the flat index i: channels fastest for a channel-last layout (consecutive threads, consecutive
// addresses), steps fastest otherwise.
__device__ inline void position(int64_t i, int64_t C, int64_t T, bool channel_last, int64_t& b, int64_t& c,
                                int64_t& t) {
  if (channel_last) {
    c = i % C;
    t = (i / C) % T;
    b = i / (C * T);
  } else {
    t = i % T;
    c = (i / T) % C;
    b = i / (C * T);
  }
}

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) forward_kernel(Rows<scalar_t> a, scalar_t* __restrict__ out,
                                                           int64_t os0, int64_t os1, int64_t os2, bool channel_last) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t n = a.B * a.C * a.L;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, c, t;
    position(i, a.C, a.L, channel_last, b, c, t);
    const opmath_t z = pre_activation(a, b, c, t);
    const opmath_t y = a.silu ? z / (opmath_t(1) + ::exp(-z)) : z;
    out[b * os0 + c * os1 + t * os2] = static_cast<scalar_t>(y);
  }
}

// The gradient of the extended row (initial_states then x) at position p in [0, L + K-1): step t = p - k read it
// with tap k. Positions past K-1 are x's gradient, the first K-1 initial_states'.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) input_grad_kernel(Rows<scalar_t> a, scalar_t* __restrict__ dx,
                                                              int64_t ds0, int64_t ds1, int64_t ds2,
                                                              scalar_t* __restrict__ dinit, bool channel_last) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t T = a.L + a.K - 1;
  const int64_t n = a.B * a.C * T;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t b, c, p;
    position(i, a.C, T, channel_last, b, c, p);
    const int64_t s = p - (a.K - 1);  // the step this position holds
    if (s >= 0 ? dx == nullptr : dinit == nullptr) continue;
    opmath_t acc = 0;
    for (int k = 0; k < a.K; ++k) {
      const int64_t t = p - k;
      if (t < 0 || t >= a.L || !reads(a, b, t, s)) continue;
      acc += static_cast<opmath_t>(a.weight[c * a.K + k]) * grad_pre(a, b, c, t);
    }
    if (s >= 0) {
      dx[b * ds0 + c * ds1 + s * ds2] = static_cast<scalar_t>(acc);
    } else {
      dinit[(b * a.C + c) * (a.K - 1) + p] = static_cast<scalar_t>(acc);
    }
  }
}

// One block per channel: each thread sums its steps (b, t) in order, then a tree over the block's threads.
template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) param_grad_kernel(Rows<scalar_t> a, scalar_t* __restrict__ dw,
                                                              scalar_t* __restrict__ db) {
  using opmath_t = at::opmath_type<scalar_t>;
  __shared__ opmath_t partial[kThreads];
  const int64_t c = blockIdx.x;
  opmath_t sums[causal_conv1d_impl::kMaxWidth + 1];
  for (int k = 0; k <= causal_conv1d_impl::kMaxWidth; ++k) sums[k] = 0;
  for (int64_t i = threadIdx.x; i < a.B * a.L; i += kThreads) {
    const int64_t b = i / a.L, t = i % a.L;
    const opmath_t g = grad_pre(a, b, c, t);
    sums[a.K] += g;
    for (int k = 0; k < a.K; ++k) {
      const int64_t s = t - (a.K - 1) + k;
      if (reads(a, b, t, s)) sums[k] += g * step(a, b, c, s);
    }
  }
  for (int k = 0; k <= a.K; ++k) {
    partial[threadIdx.x] = sums[k];
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (k < a.K && dw != nullptr) dw[c * a.K + k] = static_cast<scalar_t>(partial[0]);
      if (k == a.K && db != nullptr) db[c] = static_cast<scalar_t>(partial[0]);
    }
    __syncthreads();
  }
}

struct Plan {
  at::Tensor weight, bias, seq_idx, init;
  bool silu;
};

Plan plan(const char* op, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
          std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
          const std::optional<at::Tensor>& initial_states) {
  causal_conv1d_impl::check(op, x, weight, bias);
  const auto extras = causal_conv1d_impl::check_extras(op, x, weight, activation, seq_idx, initial_states);
  Plan p;
  p.weight = weight.contiguous();
  if (causal_conv1d_impl::given(bias)) p.bias = bias->contiguous();
  if (extras.seq_idx.defined()) p.seq_idx = extras.seq_idx.contiguous();
  p.init = extras.initial_states;
  p.silu = extras.silu;
  return p;
}

template <typename scalar_t>
Rows<scalar_t> rows(const Plan& p, const at::Tensor& x, const at::Tensor& grad) {
  Rows<scalar_t> a{};
  a.x = x.const_data_ptr<scalar_t>();
  a.xs0 = x.stride(0), a.xs1 = x.stride(1), a.xs2 = x.stride(2);
  if (p.init.defined()) {
    a.init = p.init.const_data_ptr<scalar_t>();
    a.is0 = p.init.stride(0), a.is1 = p.init.stride(1), a.is2 = p.init.stride(2);
  }
  a.weight = p.weight.const_data_ptr<scalar_t>();
  a.bias = p.bias.defined() ? p.bias.const_data_ptr<scalar_t>() : nullptr;
  a.seq = p.seq_idx.defined() ? p.seq_idx.const_data_ptr<int32_t>() : nullptr;
  if (grad.defined()) {
    a.grad = grad.const_data_ptr<scalar_t>();
    a.gs0 = grad.stride(0), a.gs1 = grad.stride(1), a.gs2 = grad.stride(2);
  }
  a.B = x.size(0), a.C = x.size(1), a.L = x.size(2);
  a.K = static_cast<int>(p.weight.size(1));
  a.silu = p.silu;
  return a;
}

} // namespace

at::Tensor causal_conv1d_mamba(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               std::optional<c10::string_view> activation, const std::optional<at::Tensor>& seq_idx,
                               const std::optional<at::Tensor>& initial_states) {
  // The checks see every device before anything runs; the guard is for the launch.
  const auto p = plan("causal_conv1d", x, weight, bias, activation, seq_idx, initial_states);
  const KernelGuard guard(x.device());
  at::Tensor out = causal_conv1d_impl::empty_like_layout(x);
  if (out.numel() == 0) return out;
  if (causal_conv1d_channel_last::takes(x, weight.size(1))) {
    causal_conv1d_channel_last::forward(x, p.weight, p.bias, p.seq_idx, p.init, p.silu, out);
    return out;
  }
  const bool channel_last = causal_conv1d_impl::channel_last(x);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_mamba_cuda", [&] {
    forward_kernel<scalar_t><<<launch::blocks_for(out.numel()), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        rows<scalar_t>(p, x, at::Tensor()), out.data_ptr<scalar_t>(), out.stride(0), out.stride(1), out.stride(2),
        channel_last);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

causal_conv1d_impl::StateGrads causal_conv1d_mamba_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 4> output_mask, std::optional<c10::string_view> activation,
    const std::optional<at::Tensor>& seq_idx, const std::optional<at::Tensor>& initial_states) {
  const auto p = plan("causal_conv1d_backward", x, weight, bias, activation, seq_idx, initial_states);
  causal_conv1d_impl::check_grad_out(grad_out, x);
  const KernelGuard guard(x.device());
  const int64_t B = x.size(0), C = x.size(1), L = x.size(2), K = weight.size(1);
  at::Tensor gx, gw, gb, gi;
  if (output_mask[0]) gx = causal_conv1d_impl::empty_like_layout(x);
  if (output_mask[1]) gw = at::empty({C, K}, weight.options());
  if (output_mask[2]) gb = at::empty({C}, x.options());
  if (output_mask[3]) gi = at::empty({B, C, K - 1}, x.options());
  if (causal_conv1d_channel_last::takes(x, K)) {
    // A grad_out in another layout (or misaligned) is copied once into x's: the kernel reads grad_out and x step
    // by step with the same vectors, and one copy costs less than the generic kernels.
    const at::Tensor grad = causal_conv1d_channel_last::vectorisable(grad_out)
                                ? grad_out
                                : causal_conv1d_impl::empty_like_layout(x).copy_(grad_out);
    causal_conv1d_channel_last::backward(grad, x, p.weight, p.bias, p.seq_idx, p.init, p.silu, gx, gw, gb, gi);
    return {gx, gw, gb, gi};
  }
  const bool channel_last = causal_conv1d_impl::channel_last(x);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "causal_conv1d_mamba_backward_cuda", [&] {
    const auto a = rows<scalar_t>(p, x, grad_out);
    scalar_t* dx = gx.defined() && gx.numel() > 0 ? gx.data_ptr<scalar_t>() : nullptr;
    scalar_t* di = gi.defined() && gi.numel() > 0 ? gi.data_ptr<scalar_t>() : nullptr;
    const int64_t positions = B * C * (L + K - 1);
    if ((dx != nullptr || di != nullptr) && positions > 0) {
      input_grad_kernel<scalar_t><<<launch::blocks_for(positions), kThreads, 0, stream>>>(
          a, dx, dx ? gx.stride(0) : 0, dx ? gx.stride(1) : 0, dx ? gx.stride(2) : 0, di, channel_last);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    scalar_t* dw = gw.defined() && gw.numel() > 0 ? gw.data_ptr<scalar_t>() : nullptr;
    scalar_t* db = gb.defined() && gb.numel() > 0 ? gb.data_ptr<scalar_t>() : nullptr;
    if ((dw != nullptr || db != nullptr) && C > 0) {
      // Sums over no steps are 0: the kernel writes them too.
      param_grad_kernel<scalar_t><<<static_cast<unsigned>(C), kThreads, 0, stream>>>(a, dw, db);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
  return {gx, gw, gb, gi};
}

} // namespace customops::cuda
