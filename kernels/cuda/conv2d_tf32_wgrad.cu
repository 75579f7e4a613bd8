// conv2d's weight gradient in TF32 (conv2d_tf32_wgrad.h says why a kernel of our own). The GEMM: output channels
// (M) x filter taps and input channels (N), reduced over the output pixels, every operand tile read from shared
// memory. A block owns 64 output channels x 64 input channels x up to 9 taps (a tap group) and walks a chunk of
// stages, a stage being a piece of an output row or several whole rows: it copies the stage's grad_out pixels and
// the input window their taps read into shared memory (cp.async, the next stage's copies in flight during this
// one's MMAs, zeros outside the image and past the channels). Each of its 8 warps accumulates 8 input channels x
// the block's 64 output channels for every tap of the group: per 8 pixels, 4 A fragments (grad_out) feed each
// tap's B fragment (the input, shifted by the tap) into 4 m16n8k8 MMAs. A pixel's 64 floats take 72 in shared
// memory, so that a fragment's 4 pixels x 8 channels fall in 32 different banks. Blocks write float32 partial
// sums, which sum_weight_partials (conv2d_partials.cu) adds in a fixed order and rounds once.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cuda/conv2d_tf32_wgrad.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_sm80.cuh"

namespace customops::cuda::tf32 {
namespace {

constexpr int kThreads = 256;
constexpr int kTileK = 64;                 // output channels of a block: 4 m16 fragments
constexpr int kTileC = 64;                 // input channels of a block: 8 a warp
constexpr int kCopies = kTileC / 4;        // 16-byte copies a pixel (kTileK == kTileC)
constexpr int kCopyPixels = kThreads / kCopies;  // pixels one pass of the block's copies covers
constexpr int kMaxTaps = 9;                // taps a block accumulates (registers: 9 x 4 x 4 floats a thread)
constexpr int kPitch = 72;                 // floats a pixel takes in shared memory
constexpr int kMaxTileQ = 64;              // output pixels of a stage row
constexpr int kStagePixels = 128;          // output pixels of a stage (64 measured 12-17% slower: more stages
                                           // and barriers, more window rows copied per output row)
constexpr int64_t kSmemCap = 200 << 10;    // both stages; one block an SM

struct Dims {
  int64_t N, stages, per_chunk;
  int H, W, C, K, P, Q, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int tile_q, q_tiles;      // output pixels of a stage row (a multiple of 8), stage columns a row
  int tile_p, p_tiles;      // output rows of a stage (several where a row is short), stages down the image
  int win_rows, win_w;      // the input window of a stage: rows, pixels a row
  int k_tiles, c_tiles;
  int64_t smem;  // bytes: both stages, or the partial sums' staging where that is more
};

__global__ void __launch_bounds__(kThreads, 1)
    tf32_weight_grad(const float* __restrict__ x, const float* __restrict__ dy, float* __restrict__ partial, Dims d) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  int tile = blockIdx.y;
  const int k0 = tile % d.k_tiles * kTileK;
  tile /= d.k_tiles;
  const int c0 = tile % d.c_tiles * kTileC, group = tile / d.c_tiles;
  const int taps = d.R * d.S, t0 = group * kMaxTaps, ntaps = min(kMaxTaps, taps - t0);
  const int r_lo = t0 / d.S;
  const int64_t first = blockIdx.x * d.per_chunk, last = min(d.stages, first + d.per_chunk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int dy_pixels = d.tile_p * d.tile_q;

  // Where each tap's B fragment starts in a stage (floats): after the grad_out pixels, the tap's window row and
  // column, this lane's input channel.
  int tap_at[kMaxTaps];
#pragma unroll
  for (int i = 0; i < kMaxTaps; ++i) {
    const int tap = t0 + min(i, ntaps - 1);
    tap_at[i] = (dy_pixels + (tap / d.S - r_lo) * d.dil_h * d.win_w + tap % d.S * d.dil_w) * kPitch + warp * 8 + g;
  }
  float acc[kMaxTaps][4][4] = {};

  const int j = threadIdx.x % kCopies;  // this thread's 16-byte column of every pixel it copies
  const auto copy_stage = [&](int64_t stage, float* buf) {
    const int q0 = int(stage % d.q_tiles) * d.tile_q;
    const int64_t rest = stage / d.q_tiles;
    const int p0 = int(rest % d.p_tiles) * d.tile_p;
    const int64_t n = rest / d.p_tiles;
    const int k = k0 + 4 * j, c = c0 + 4 * j;
    int row = (threadIdx.x / kCopies) / d.tile_q, col = (threadIdx.x / kCopies) % d.tile_q;
    for (int pix = threadIdx.x / kCopies; pix < dy_pixels; pix += kCopyPixels) {
      const bool ok = k < d.K && p0 + row < d.P && q0 + col < d.Q;
      sm80::copy16(buf + pix * kPitch + 4 * j, ok ? dy + ((n * d.P + p0 + row) * d.Q + q0 + col) * d.K + k : dy, ok);
      for (col += kCopyPixels; col >= d.tile_q; col -= d.tile_q) ++row;
    }
    float* window = buf + dy_pixels * kPitch;
    const int ih0 = p0 * d.stride_h - d.pad_h + r_lo * d.dil_h, iw0 = q0 * d.stride_w - d.pad_w;
    row = (threadIdx.x / kCopies) / d.win_w, col = (threadIdx.x / kCopies) % d.win_w;
    for (int pix = threadIdx.x / kCopies; pix < d.win_rows * d.win_w; pix += kCopyPixels) {
      const int ih = ih0 + row, iw = iw0 + col;
      const bool ok = c < d.C && ih >= 0 && ih < d.H && iw >= 0 && iw < d.W;
      sm80::copy16(window + pix * kPitch + 4 * j, ok ? x + ((n * d.H + ih) * d.W + iw) * d.C + c : x, ok);
      for (col += kCopyPixels; col >= d.win_w; col -= d.win_w) ++row;
    }
  };

  const int floats = (dy_pixels + d.win_rows * d.win_w) * kPitch;
  if (first < last) copy_stage(first, smem);
  sm80::commit_copies();
  for (int64_t stage = first; stage < last; ++stage) {
    const float* buf = smem + (stage - first) % 2 * floats;
    if (stage + 1 < last) copy_stage(stage + 1, smem + (stage + 1 - first) % 2 * floats);
    sm80::commit_copies();
    sm80::copies_done_but<1>();
    __syncthreads();
    const int q0 = int(stage % d.q_tiles) * d.tile_q, p0 = int(stage / d.q_tiles % d.p_tiles) * d.tile_p;
    const int steps = (min(d.tile_q, d.Q - q0) + 7) / 8, rows = min(d.tile_p, d.P - p0);
    for (int row = 0; row < rows; ++row) {
      for (int step = 0; step < steps; ++step) {
        // A (16 output channels x 8 pixels): pixel t or t + 4, channel g or g + 8 of each 16. B (8 pixels x 8
        // input channels): the window pixel that output pixel t or t + 4 reads through the tap. All of a step's
        // fragments are loaded before its MMAs: two warps a scheduler hide little latency.
        const float* a_at = buf + (row * d.tile_q + 8 * step + t) * kPitch + g;
        const float* b_at = buf + (row * d.stride_h * d.win_w + (8 * step + t) * d.stride_w) * kPitch;
        const int b_next = 4 * d.stride_w * kPitch;
        uint32_t a[4][4], b[kMaxTaps][2];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          a[m][0] = sm80::to_tf32(a_at[16 * m]);
          a[m][1] = sm80::to_tf32(a_at[16 * m + 8]);
          a[m][2] = sm80::to_tf32(a_at[4 * kPitch + 16 * m]);
          a[m][3] = sm80::to_tf32(a_at[4 * kPitch + 16 * m + 8]);
        }
#pragma unroll
        for (int i = 0; i < kMaxTaps; ++i) {
          b[i][0] = sm80::to_tf32(b_at[tap_at[i]]);
          b[i][1] = sm80::to_tf32(b_at[tap_at[i] + b_next]);
        }
#pragma unroll
        for (int i = 0; i < kMaxTaps; ++i) {
          if (i < ntaps) {
#pragma unroll
            for (int m = 0; m < 4; ++m) sm80::mma_16x8x8_tf32(acc[i][m], a[m], b[i][0], b[i][1]);
          }
        }
      }
    }
    __syncthreads();  // before the next iteration's copies overwrite this stage
  }

  // Partial sums (K, C, R, S) of this chunk. Stored straight from the fragments (4 bytes a lane, taps apart) the
  // stores took about a quarter of the kernel's time (64 -> 64 channels 56x56); so the block's tile goes through
  // shared memory as [output channel][input channel][tap] rows, one more float a row against bank conflicts, and
  // out in runs of whole rows: with one tap group a row of the tile is one run of the partial sums.
  const int pitch = kTileC * ntaps + 1;
#pragma unroll
  for (int i = 0; i < kMaxTaps; ++i) {
    if (i < ntaps) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float* at = smem + (16 * m + g + 8 * h) * pitch + (warp * 8 + 2 * t) * ntaps + i;
          at[0] = acc[i][m][2 * h];
          at[ntaps] = acc[i][m][2 * h + 1];
        }
      }
    }
  }
  __syncthreads();
  float* out = partial + int64_t(blockIdx.x) * d.K * d.C * taps;
  const int rows = min(kTileK, d.K - k0), row_len = min(kTileC, d.C - c0) * ntaps;
  for (int k = warp; k < rows; k += kThreads / 32) {
    float* o = out + (int64_t(k0 + k) * d.C + c0) * taps + t0;
    const float* from = smem + k * pitch;
    if (ntaps == taps) {
      for (int e = lane; e < row_len; e += 32) o[e] = from[e];
    } else {
      for (int e = lane; e < row_len; e += 32) o[e / ntaps * taps + e % ntaps] = from[e];
    }
  }
}

// Shared memory the epilogue stages a block's partial sums in (bytes).
int64_t epilogue_smem(const Dims& d) {
  return int64_t(kTileK) * (kTileC * std::min(kMaxTaps, d.R * d.S) + 1) * int64_t(sizeof(float));
}

// Stage sizes for g, or tile_q = 0 when even 8 pixels' window overflows shared memory. A stage holds a piece of
// at most kMaxTileQ pixels of a long row, or up to kStagePixels of whole rows (56 x 56 images: 2 rows of 56; 14 x
// 14: 8 rows of 16).
Dims plan(const Geometry& g) {
  Dims d{};
  d.N = g.N;
  d.H = int(g.H), d.W = int(g.W), d.C = int(g.C), d.K = int(g.K), d.P = int(g.P), d.Q = int(g.Q);
  d.R = int(g.R), d.S = int(g.S), d.pad_h = int(g.pad_h), d.pad_w = int(g.pad_w);
  d.stride_h = int(g.stride_h), d.stride_w = int(g.stride_w), d.dil_h = int(g.dil_h), d.dil_w = int(g.dil_w);
  d.k_tiles = (d.K + kTileK - 1) / kTileK;
  d.c_tiles = (d.C + kTileC - 1) / kTileC;
  // The most filter rows one tap group spans.
  const int taps = d.R * d.S;
  int group_rows = 0;
  for (int t0 = 0; t0 < taps; t0 += kMaxTaps) {
    group_rows = std::max(group_rows, (std::min(t0 + kMaxTaps, taps) - 1) / d.S - t0 / d.S + 1);
  }
  const int row = (d.Q + 7) / 8 * 8;
  for (d.tile_q = std::min(kMaxTileQ, row); d.tile_q > 0; d.tile_q -= 8) {
    d.tile_p = d.tile_q == row ? std::clamp(kStagePixels / row, 1, d.P) : 1;
    for (; d.tile_p > 0; --d.tile_p) {
      d.win_rows = (d.tile_p - 1) * d.stride_h + (group_rows - 1) * d.dil_h + 1;
      d.win_w = (d.tile_q - 1) * d.stride_w + (d.S - 1) * d.dil_w + 1;
      d.smem = 2 * (int64_t(d.tile_p) * d.tile_q + int64_t(d.win_rows) * d.win_w) * kPitch * int64_t(sizeof(float));
      if (d.smem <= kSmemCap) break;
    }
    if (d.tile_p > 0) break;
  }
  if (d.tile_q > 0) {
    d.smem = std::max(d.smem, epilogue_smem(d));
    d.q_tiles = (d.Q + d.tile_q - 1) / d.tile_q;
    d.p_tiles = (d.P + d.tile_p - 1) / d.tile_p;
    d.stages = d.N * d.p_tiles * d.q_tiles;
  }
  return d;
}

// Batch chunks: the fewest that minimise a time model, waves x stages a block + the partial sums' traffic (64 x 64
// channels and 9 taps of a stage's pixels at about 2 TFLOPS an SM; partials at about 3 TB/s).
int64_t chunks_for(const Dims& d, int64_t tiles, int64_t resident) {
  const double stage_ns =
      double(d.tile_p) * d.tile_q * kTileK * kTileC * std::min(kMaxTaps, d.R * d.S) * 2 / 2000.0;
  const double partial_ns = double(d.K) * d.C * d.R * d.S * sizeof(float) * 2 / 3000.0;
  int64_t best = 1;
  double best_ns = std::numeric_limits<double>::infinity();
  const int64_t most = std::min<int64_t>(d.stages, std::max<int64_t>(1, 4 * resident / tiles));
  for (int64_t chunks = 1; chunks <= most; ++chunks) {
    const int64_t waves = (tiles * chunks + resident - 1) / resident;
    const double ns = double(waves) * double((d.stages + chunks - 1) / chunks) * stage_ns + double(chunks) * partial_ns;
    if (ns < best_ns) best = chunks, best_ns = ns;
  }
  return best;
}

} // namespace

Refusal supports_weight_grad(at::ScalarType dtype, const Geometry& g, bool channels_last) {
  if (dtype != at::kFloat) return Refusal::kDtype;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return Refusal::kDevice;
  if (g.C % 4 != 0 || g.K % 4 != 0) return Refusal::kAlignment;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t tiles = ((g.K + kTileK - 1) / kTileK) * ((g.C + kTileC - 1) / kTileC) *
                        ((g.R * g.S + kMaxTaps - 1) / kMaxTaps);  // the grid's second dimension
  const bool fits = g.N > 0 && g.P > 0 && g.Q > 0 && g.H * g.W * g.C <= kMax && g.P * g.Q * g.K <= kMax &&
                    g.K * g.C * g.R * g.S <= kMax && g.R * g.S <= kMax / 16 && tiles <= 65535;
  if (!fits || plan(g).tile_q == 0) return Refusal::kSize;
  // Where both channel counts are large the explicit path's im2col costs less next to its GEMM (cuBLAS near the
  // tensor cores' rate), and this kernel runs at 100-200 TFLOPS (mma.sync TF32 alone: 323 measured). H100, queued,
  // this kernel against the explicit path: channels_last, faster up to 256 channels (64 -> 64 56x56 batch 64 0.15
  // against 0.51 ms, cuDNN 0.16; 128 28x28 0.09 against 0.17; 256 14x14 0.18 against 0.28; 256 56x56 1.11 against
  // 1.19; strided 256 28x28 0.26 against 0.32) and at 512 channels on 7x7 (0.24 against 0.74) and 14x14 (0.68
  // against 0.89), slower at 512 channels 28x28 (1.23 against 0.91); NCHW, where this kernel's operands go through
  // transposes and the explicit path reads NCHW as it is, faster at 64 channels (0.24 against 0.42) and on 14x14 and
  // smaller images (256: 0.21 against 0.24; 512: 0.73 against 0.81), slower from 28x28 on with more channels
  // (strided 128 56x56 0.38 against 0.30, 256 56x56 1.28 against 1.01; 128 28x28 0.12 against 0.13).
  const int64_t fewest = std::min(g.C, g.K), pixels = g.P * g.Q;
  if ((fewest > 256 && pixels > 196) || (!channels_last && fewest > 64 && pixels > 196)) return Refusal::kSlower;
  return Refusal::kNone;
}

at::Tensor weight_grad_partials(const at::Tensor& grad_out, const at::Tensor& x, const Geometry& g) {
  Dims d = plan(g);
  const auto kernel = tf32_weight_grad;
  launch::opt_in_shared_memory(kernel);
  const int64_t tiles = int64_t(d.k_tiles) * d.c_tiles * ((d.R * d.S + kMaxTaps - 1) / kMaxTaps);
  const int64_t chunks = chunks_for(d, tiles, launch::resident_blocks(kernel, kThreads, d.smem));
  d.per_chunk = (d.stages + chunks - 1) / chunks;
  const int64_t used = (d.stages + d.per_chunk - 1) / d.per_chunk;  // every chunk non-empty
  auto partial = at::empty({used, g.K, g.C, g.R, g.S}, x.options());
  kernel<<<dim3(unsigned(used), unsigned(tiles)), kThreads, d.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<float>(), grad_out.const_data_ptr<float>(), partial.mutable_data_ptr<float>(), d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

} // namespace customops::cuda::tf32
