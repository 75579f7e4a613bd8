// What conv2d's two direct weight-gradient kernels share (tf32_wgrad.cu for float32 as TF32,
// half_wgrad.cu for float16 and bfloat16): the GEMM is output channels (M) x filter taps and input
// channels (N), reduced over the output pixels. A block owns 64 output channels x 64 input channels x up to 9 taps
// (a tap group) and walks a chunk of stages, a stage being a piece of an output row or several whole rows: it
// copies the stage's grad_out pixels and the input window their taps read into shared memory once (cp.async, the
// next stage's copies issued a few at a time between this one's MMA steps, zeros outside the image and past the
// channels), and its 8 warps, 8 input channels each, feed every tap of the group from that one window. Blocks
// write float32 partial sums (chunks, K, C, R, S), which sum_weight_partials (partials.cu) adds in a fixed
// order and rounds once. Here: the stage plan, the chunk count, the walk from stage to stage and the epilogue.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/implicit.h"

namespace customops::cuda::direct_wgrad {

using implicit_gemm::Geometry;
using implicit_gemm::Refusal;

constexpr int kThreads = 256;
constexpr int kTileK = 64;         // output channels of a block
constexpr int kTileC = 64;         // input channels of a block: 8 a warp
constexpr int kMaxTaps = 9;        // taps a block accumulates (registers: 9 x 4 x 4 floats a thread)
constexpr int kCopiesPerStep = 2;  // copies of each walk a thread issues after an MMA step
constexpr int64_t kSmemCap = 200 << 10;  // both stages; one block an SM

// How a kernel keeps a stage: shared-memory bytes of a grad_out pixel and of a window pixel, the output pixels a
// stage aims at, the longest piece of a row, bytes beyond both stages.
struct Layout {
  int dy_bytes, win_bytes, stage_pixels, max_tile_q, extra;
};

struct Dims {
  int64_t N, stages, per_chunk;
  int H, W, C, K, P, Q, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int tile_q, q_tiles;      // output pixels of a stage row (a multiple of 8), stage columns a row
  int tile_p, p_tiles;      // output rows of a stage (several where a row is short), stages down the image
  int win_rows, win_w;      // the input window of a stage: rows, pixels a row
  int k_tiles, c_tiles;
  int64_t smem;  // bytes: both stages, or the partial sums' staging where that is more
};

// Shared memory the epilogue stages a block's partial sums in (bytes).
inline int64_t epilogue_smem(const Dims& d) {
  return int64_t(kTileK) * (kTileC * std::min(kMaxTaps, d.R * d.S) + 1) * int64_t(sizeof(float));
}

// Stage sizes for g, or tile_q = 0 when even 8 pixels' window overflows shared memory. A stage holds a piece of
// at most l.max_tile_q pixels of a long row, or up to l.stage_pixels of whole rows (rows padded to multiples of 8
// pixels).
inline Dims plan(const Geometry& g, const Layout& l) {
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
  for (d.tile_q = std::min(l.max_tile_q, row); d.tile_q > 0; d.tile_q -= 8) {
    d.tile_p = d.tile_q == row ? std::clamp(l.stage_pixels / row, 1, d.P) : 1;
    for (; d.tile_p > 0; --d.tile_p) {
      d.win_rows = (d.tile_p - 1) * d.stride_h + (group_rows - 1) * d.dil_h + 1;
      d.win_w = (d.tile_q - 1) * d.stride_w + (d.S - 1) * d.dil_w + 1;
      d.smem = 2 * (int64_t(d.tile_p) * d.tile_q * l.dy_bytes + int64_t(d.win_rows) * d.win_w * l.win_bytes) +
               l.extra;
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

// Blocks of the grid's second dimension: output-channel tiles x input-channel tiles x tap groups.
inline int64_t tiles_of(const Geometry& g) {
  return ((g.K + kTileK - 1) / kTileK) * ((g.C + kTileC - 1) / kTileC) * ((g.R * g.S + kMaxTaps - 1) / kMaxTaps);
}

// kSize where a kernel cannot take g whatever its dtype: an empty batch or image, offsets past 32 bits within an
// image (the copies' walks), too many tiles for the grid, or a window that fits no stage; else kNone.
// Padding, stride and dilation are int (Dims), and so is a stage's window (plan()): its rows stay within the
// padded height, its row pieces of up to l.max_tile_q pixels within the padded width and l.max_tile_q strides.
inline Refusal check_size(const Geometry& g, const Layout& l) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const bool window = implicit_gemm::window_fits_int32(g) && g.H + 2 * g.pad_h <= kMax &&
                      g.W + 2 * g.pad_w + l.max_tile_q * g.stride_w <= kMax;
  const bool fits = window && g.N > 0 && g.P > 0 && g.Q > 0 && g.H * g.W * g.C <= kMax && g.P * g.Q * g.K <= kMax &&
                    g.K * g.C * g.R * g.S <= kMax && g.R * g.S <= kMax / 16 && tiles_of(g) <= 65535;
  return fits && plan(g, l).tile_q > 0 ? Refusal::kNone : Refusal::kSize;
}

// Batch chunks: the fewest that minimise a time model, waves x stages a block + the partial sums' traffic (64 x 64
// channels and 9 taps of a stage's pixels at `flops_per_ns` an SM; partials at about 3 TB/s). Only the ratio of
// the two terms matters.
inline int64_t chunks_for(const Dims& d, int64_t tiles, int64_t resident, double flops_per_ns) {
  const double stage_ns =
      double(d.tile_p) * d.tile_q * kTileK * kTileC * std::min(kMaxTaps, d.R * d.S) * 2 / flops_per_ns;
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

// Sets the chunk size for `resident` blocks an SM-full and returns the chunks the grid runs (every one non-empty).
inline int64_t split_into_chunks(Dims& d, int64_t tiles, int64_t resident, double flops_per_ns) {
  const int64_t chunks = chunks_for(d, tiles, resident, flops_per_ns);
  d.per_chunk = (d.stages + chunks - 1) / chunks;
  return (d.stages + d.per_chunk - 1) / d.per_chunk;
}

// A stage's image and first output row and column; stages go along rows, then down, then to the next image.
struct Stage {
  int n, p0, q0;
};

__device__ __forceinline__ Stage first_stage(const Dims& d, int64_t stage) {
  return Stage{int(stage / d.q_tiles / d.p_tiles), int(stage / d.q_tiles % d.p_tiles) * d.tile_p,
               int(stage % d.q_tiles) * d.tile_q};
}

__device__ __forceinline__ Stage next_stage(const Dims& d, Stage st) {
  st.q0 += d.tile_q;
  if (st.q0 >= d.Q) {
    st.q0 = 0;
    st.p0 += d.tile_p;
    if (st.p0 >= d.P) st.p0 = 0, ++st.n;
  }
  return st;
}

// The block's partial sums of one chunk (K, C, R, S) from each thread's accumulators acc[tap][m][4] (m16n8
// fragments: accumulator 2h + e of block m is output channel `out_channel(m, h)` of the tile and input channel
// warp * 8 + 2t + e). Stored straight from the fragments (4 bytes a lane, taps apart) the stores took about a
// quarter of the TF32 kernel's time (64 -> 64 channels 56x56); so the tile goes through shared memory as [output
// channel][input channel][tap] rows, one more float a row against bank conflicts, and out in runs of whole rows:
// with one tap group a row of the tile is one run of the partial sums. Shared memory must be free (a barrier
// after the last stage's reads).
template <typename OutChannel>
__device__ __forceinline__ void store_partials(const float (&acc)[kMaxTaps][4][4], float* smem, float* partial,
                                               const Dims& d, int k0, int c0, int t0, int ntaps,
                                               OutChannel out_channel) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4, taps = d.R * d.S;
  const int pitch = kTileC * ntaps + 1;
#pragma unroll
  for (int i = 0; i < kMaxTaps; ++i) {
    if (i < ntaps) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float* at = smem + out_channel(m, h) * pitch + (warp * 8 + 2 * t) * ntaps + i;
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

} // namespace customops::cuda::direct_wgrad
