// depthwise_conv2d on CUDA, NCHW and channels_last: the input gradient of a square window at stride 2 (where
// conv::period_dgrad_applies).
//
// At stride S an input pixel is read by the taps whose row and column are congruent to its own (plus the padding)
// modulo S, so a gather that visits every tap and tests it wastes S*S - 1 of every S*S tests, and one that walks
// only the hits (depthwise_conv2d.cu's direct kernel) still divides and branches per pixel. Here a thread owns
// whole periods instead: the S x S input pixels (a*S + r - ph, b*S + q - pw), r, q < S. Pixel (r, q) of period
// (a, b) takes the taps (r + j*S, q + i*S), which read output gradient (a - j, b - i): the same J x J window of
// output gradients (J = ceil(K / S)) for the whole period, every tap used once, no test but the plane's edges.
// A thread walks a column of periods down R rows, loading one new row of J output gradients per period row; in
// channels_last it does so for V neighbouring channels (one word), neighbouring threads taking the next words of
// the same pixel, so that a warp's loads are contiguous.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/depthwise_conv2d/direct.h"

namespace customops::cuda::depthwise {
namespace {

constexpr int kThreads = 256;
constexpr int kMostRows = 8;  // period rows per thread

struct Periods {
  int64_t channels, h, w, out_h, out_w;
  int ph, pw;
  int a0, rows_of_periods, b0, cols_of_periods;  // the periods that hold input pixels
  int rows, groups;                              // period rows per thread, threads down a plane
};

// V channels' values, loaded and stored as one word.
template <typename scalar_t, int V>
struct alignas(sizeof(scalar_t) * V) Word {
  scalar_t v[V];
};

// Thread order: NCHW, period column fastest (then period-row group, then plane); channels_last, channel word
// fastest (then column, group, image).
template <typename scalar_t, int K, int S, bool CL, int V>
__global__ void __launch_bounds__(kThreads)
    period_input_grad_kernel(const scalar_t* __restrict__ gout, const scalar_t* __restrict__ weight,
                             scalar_t* __restrict__ gin, Periods p, int64_t total) {
  using opmath_t = at::opmath_type<scalar_t>;
  using word_t = Word<scalar_t, V>;
  constexpr int J = (K + S - 1) / S;
  const int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= total) return;
  int64_t rest = idx, c0, pixel_step, in_base, out_base;
  if constexpr (CL) {
    const int64_t words = p.channels / V;
    c0 = rest % words * V;
    rest /= words;
  }
  const int b = p.b0 + static_cast<int>(rest % p.cols_of_periods);
  rest /= p.cols_of_periods;
  const int group = static_cast<int>(rest % p.groups);
  rest /= p.groups;  // the image (channels_last) or the plane (NCHW)
  if constexpr (CL) {
    pixel_step = p.channels;
    out_base = rest * p.out_h * p.out_w * p.channels + c0;
    in_base = rest * p.h * p.w * p.channels + c0;
  } else {
    c0 = rest % p.channels;
    pixel_step = 1;
    out_base = rest * p.out_h * p.out_w;
    in_base = rest * p.h * p.w;
  }
  const int a_begin = p.a0 + group * p.rows;
  const int a_last = p.a0 + p.rows_of_periods, a_end = a_begin + p.rows < a_last ? a_begin + p.rows : a_last;

  opmath_t w[K][K][V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const scalar_t* taps = weight + (c0 + v) * K * K;
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
#pragma unroll
      for (int kx = 0; kx < K; ++kx) w[ky][kx][v] = static_cast<opmath_t>(taps[ky * K + kx]);
    }
  }
  bool col_in[J];
#pragma unroll
  for (int i = 0; i < J; ++i) col_in[i] = b - i >= 0 && b - i < p.out_w;
  int64_t x_of[S];
  bool x_in[S];
#pragma unroll
  for (int q = 0; q < S; ++q) {
    x_of[q] = int64_t(b) * S + q - p.pw;
    x_in[q] = x_of[q] >= 0 && x_of[q] < p.w;
  }
  // win[j][i]: the output gradients (a - j, b - i) of the current period row a.
  opmath_t win[J][J][V];
  auto load_row = [&](int row, opmath_t (*out)[V]) {
    const bool row_in = row >= 0 && row < p.out_h;
#pragma unroll
    for (int i = 0; i < J; ++i) {
      word_t word{};
      if (row_in && col_in[i]) {
        word = *reinterpret_cast<const word_t*>(gout + out_base + (int64_t(row) * p.out_w + b - i) * pixel_step);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) out[i][v] = static_cast<opmath_t>(word.v[v]);
    }
  };
#pragma unroll
  for (int j = 1; j < J; ++j) load_row(a_begin - j, win[j]);
  for (int a = a_begin; a < a_end; ++a) {
    load_row(a, win[0]);
#pragma unroll
    for (int r = 0; r < S; ++r) {
      const int64_t y = int64_t(a) * S + r - p.ph;
      if (y < 0 || y >= p.h) continue;
#pragma unroll
      for (int q = 0; q < S; ++q) {
        opmath_t acc[V] = {};
#pragma unroll
        for (int j = 0; j < J; ++j) {
#pragma unroll
          for (int i = 0; i < J; ++i) {
            if (r + j * S < K && q + i * S < K) {
#pragma unroll
              for (int v = 0; v < V; ++v) acc[v] += win[j][i][v] * w[r + j * S][q + i * S][v];
            }
          }
        }
        if (x_in[q]) {
          word_t word;
#pragma unroll
          for (int v = 0; v < V; ++v) word.v[v] = static_cast<scalar_t>(acc[v]);
          *reinterpret_cast<word_t*>(gin + in_base + (y * p.w + x_of[q]) * pixel_step) = word;
        }
      }
    }
#pragma unroll
    for (int j = J - 1; j > 0; --j) {
#pragma unroll
      for (int i = 0; i < J; ++i) {
#pragma unroll
        for (int v = 0; v < V; ++v) win[j][i][v] = win[j - 1][i][v];
      }
    }
  }
}

template <typename scalar_t, int K, bool CL, int V>
void launch(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& grad_input, cudaStream_t stream) {
  constexpr int S = 2;
  const auto& s = bp.p.s;
  const auto& win = bp.p.w;
  Periods p{s.C, s.H, s.W, s.out_h, s.out_w, int(win.ph), int(win.pw), 0, 0, 0, 0, 1, 1};
  p.a0 = p.ph / S;
  p.rows_of_periods = static_cast<int>((s.H - 1 + p.ph) / S - p.a0 + 1);
  p.b0 = p.pw / S;
  p.cols_of_periods = static_cast<int>((s.W - 1 + p.pw) / S - p.b0 + 1);
  const int64_t columns = s.N * s.C / V * p.cols_of_periods;  // threads across the periods' rows
  p.rows = static_cast<int>(launch::rows_per_thread(columns, p.rows_of_periods, kMostRows, 2048));
  p.groups = (p.rows_of_periods + p.rows - 1) / p.rows;
  const int64_t total = columns * p.groups;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  TORCH_CHECK(blocks < (int64_t(1) << 31), "customops::depthwise_conv2d_backward: the input gradient's ", total,
              " threads exceed one CUDA grid");
  period_input_grad_kernel<scalar_t, K, S, CL, V><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      bp.gout.const_data_ptr<scalar_t>(), bp.p.weight.const_data_ptr<scalar_t>(), grad_input.data_ptr<scalar_t>(),
      p, total);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename scalar_t, bool CL, int V>
void launch_window(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& grad_input, cudaStream_t stream) {
  switch (bp.p.w.kh) {
    case 3: launch<scalar_t, 3, CL, V>(bp, grad_input, stream); break;
    case 5: launch<scalar_t, 5, CL, V>(bp, grad_input, stream); break;
    default: launch<scalar_t, 7, CL, V>(bp, grad_input, stream); break;
  }
}

}  // namespace

bool period_input_grad(const conv::DepthwiseBackwardPlan& bp, const at::Tensor& grad_input) {
  const auto& p = bp.p;
  const auto& w = p.w;
  if (!conv::period_dgrad_applies(w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, p.m, p.channels_last,
                                  p.s.C * int64_t(p.x.element_size()))) {
    return false;
  }
  if (grad_input.numel() == 0) return true;
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.x.scalar_type(), "depthwise_period_input_grad", [&] {
    // Channel pairs as one word where the channels and both buffers allow.
    constexpr size_t kPair = 2 * sizeof(scalar_t);
    if (!p.channels_last) {
      launch_window<scalar_t, false, 1>(bp, grad_input, stream);
    } else if (p.s.C % 2 == 0 && launch::aligned(bp.gout.const_data_ptr(), kPair) &&
               launch::aligned(grad_input.const_data_ptr(), kPair)) {
      launch_window<scalar_t, true, 2>(bp, grad_input, stream);
    } else {
      launch_window<scalar_t, true, 1>(bp, grad_input, stream);
    }
  });
  return true;
}

}  // namespace customops::cuda::depthwise
