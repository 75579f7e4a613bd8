// Grouped convolution on the tensor cores (mma.sync). A block owns a slice of whole groups (at most
// kSliceChannels input channels) and walks output tiles of kTileP rows x kTileQ pixels: it copies the tile's
// input window (every pixel the taps read, the slice's channels) into shared memory once (cp.async, zeros
// outside the image). Forward (`mma_conv`): a warp takes a group and all kTileP rows; per tap and 8 input
// channels, ldmatrix.x4 reads two rows' 16-pixel A fragments and each filter fragment (from shared memory)
// feeds kTileP m16n8k8 MMAs, float32 accumulators. Weight gradient (`mma_weight_grad`): see there. The
// window's 16-byte chunks are XOR-swizzled by pixel so that ldmatrix's 8 rows (8 pixels, one group's channels
// each) fall in different banks. On an H100 the first version (a warp per (group, row), one MMA per filter
// read, a division per copied chunk) was issue-bound at 0.19 ms for ResNeXt's 32 x 256 x 56 x 56 float16
// forward; this one takes 0.12 (cuDNN 0.10).
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/macros/Macros.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/grouped_mma.h"

namespace customops::cuda::grouped::mma {
namespace {

constexpr int kThreads = 256;
constexpr int kTileQ = 16;             // output pixels of a tile row: the MMA's 16 rows
constexpr int kTileP = 4;              // output rows of a tile
constexpr int kSliceChannels = 128;    // input channels of a block's groups (16 chunks of 16 bytes a pixel)
constexpr int64_t kSmemCap = 110 << 10;  // two blocks per H100 SM at least
constexpr int kMaxOutGroupChannels = 32;

struct Launch {
  Conv c;
  int slice_groups, tile_rows, tile_cols, swizzle;
  int pitch;  // window pixels between rows in shared memory: tile_cols rounded up to a multiple of 8
  int64_t smem;  // bytes of dynamic shared memory
};

constexpr int kMaxItems = 12;  // weight gradient: (group, tap pair) accumulator tiles a warp holds

// The input window of output tile (n, oh0, ow0) into shared memory: every pixel the tile's taps read, the
// slice's channels from `slice` on, zeros outside the image. chunks (a power of two) divides kThreads, so a
// thread copies chunk threadIdx.x % chunks of every (kThreads / chunks)-th pixel. (float32 rounded to TF32 on its
// way through registers ran ResNeXt's 32 x 256 x 56 x 56 forward at 0.198 ms on an H100: each thread's loads
// waited on one another; copied as it is and rounded as fragments load, see mma_conv.)
template <typename T>
__device__ __forceinline__ void copy_window(uint4* window, const T* __restrict__ in, const Launch& l, int64_t n,
                                            int oh0, int ow0, int64_t slice, int chunks) {
  const Conv& c = l.c;
  const int j = threadIdx.x % chunks, step = kThreads / chunks, first = threadIdx.x / chunks;
  const int ih0 = oh0 * c.stride_h - c.pad_h, iw0 = ow0 * c.stride_w - c.pad_w;
  const int pixels = l.tile_rows * l.tile_cols;
  int wr = first / l.tile_cols, wc = first % l.tile_cols;
  for (int pix = first; pix < pixels; pix += step) {
    const int ih = ih0 + wr, iw = iw0 + wc;
    const bool ok = ih >= 0 && ih < c.IH && iw >= 0 && iw < c.IW;
    const T* src = ok ? in + ((n * c.IH + ih) * c.IW + iw) * c.IC + slice + j * (16 / int(sizeof(T))) : in;
    const int at = wr * l.pitch + wc;
    sm80::copy16(window + at * chunks + (j ^ (at & l.swizzle)), src, ok);
    for (wc += step; wc >= l.tile_cols; wc -= l.tile_cols) ++wr;
  }
}

template <typename T>
__device__ __forceinline__ void mma_16x8x8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, at::Half>) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b));
  } else {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(b));
  }
#endif
}

// The MMA's B fragments, wp[group][tap][kc][nb][lane]: lane holds input channels kc * 8 + 2 * (lane % 4) + {0, 1}
// of output channel nb * 8 + lane / 4 (the low half the first); in TF32 (Frag<float>, two words) channels
// kc * 8 + lane % 4 and + 4, rounded. The filter w has any strides.
template <typename T>
struct Frag {
  using type = uint32_t;
  static __device__ __forceinline__ type make(const T* at, int64_t next) {
    const sm80::Pair<T> pair{at[0], at[next]};
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
};

template <>
struct Frag<float> {
  using type = uint2;
  static __device__ __forceinline__ type make(const float* at, int64_t next) {
    return make_uint2(sm80::to_tf32(at[0]), sm80::to_tf32(at[4 * next]));
  }
};

template <typename T>
__global__ void pack_fragments(const T* __restrict__ w, typename Frag<T>::type* __restrict__ wp, Conv c, int kg8,
                               int64_t sk, int64_t sc, int64_t sr, int64_t ss) {
  const int cg8 = c.ICg / 8, taps = c.R * c.S;
  const int64_t total = int64_t(c.groups) * taps * cg8 * kg8 * 32;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int lane = int(i % 32), nb = int(i / 32 % kg8), kc = int(i / 32 / kg8 % cg8);
    const int tap = int(i / 32 / kg8 / cg8 % taps);
    const int64_t g = i / 32 / kg8 / cg8 / taps;
    const int n = nb * 8 + lane / 4, k = kc * 8 + (std::is_same_v<T, float> ? 1 : 2) * (lane % 4);
    const int r = tap / c.S, s = tap % c.S;
    if (c.flip) {  // w is (K, C / groups, R, S): input channel k of this gather is output channel k of w
      wp[i] = Frag<T>::make(w + (g * c.ICg + k) * sk + n * sc + (c.R - 1 - r) * sr + (c.S - 1 - s) * ss, sk);
    } else {
      wp[i] = Frag<T>::make(w + (g * c.OCg + n) * sk + k * sc + r * sr + s * ss, sc);
    }
  }
}

// One output channel block (kKG8 == 1) fits 80 registers, three blocks an SM; more keep their accumulators
// (ptxas capped them at 128 and spilled without the explicit bounds).
template <typename T, int kKG8>
__global__ void __launch_bounds__(kThreads, kKG8 == 1 ? 3 : 1)
    mma_conv(const T* __restrict__ in, const typename Frag<T>::type* __restrict__ wp, const T* __restrict__ bias,
             T* __restrict__ out, Launch l) {
  using F = typename Frag<T>::type;
  constexpr bool kTf32 = std::is_same_v<T, float>;
  extern __shared__ uint4 smem[];
  const Conv& c = l.c;
  const int cg8 = c.ICg / 8, taps = c.R * c.S;
  const int gchunks = c.ICg * int(sizeof(T)) / 16;  // 16-byte chunks of a group's channels
  const int chunks = l.slice_groups * gchunks;      // of a window pixel
  const int window = l.tile_rows * l.pitch;
  uint4* tile = smem;  // [window pixel][chunk ^ (pixel & swizzle)]
  F* wsm = reinterpret_cast<F*>(tile + window * chunks);  // [group][tap][kc][nb][lane]
  const int g0 = blockIdx.y * l.slice_groups;
  const int words = l.slice_groups * taps * cg8 * kKG8 * 32;
  const F* wsrc = wp + int64_t(g0) * taps * cg8 * kKG8 * 32;
  for (int i = threadIdx.x; i < words; i += kThreads) wsm[i] = wsrc[i];  // visible after the first barrier

  const int tiles_q = (c.OW + kTileQ - 1) / kTileQ, tiles_p = (c.OH + kTileP - 1) / kTileP;
  const int64_t tiles = c.N * tiles_p * tiles_q;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t tile_base = sm80::smem_address(tile);
  // Byte steps in the window: a tap row, a tap column, two output rows; lane_at: the lane's pixel of tap (0, 0).
  const uint32_t row_step = uint32_t(c.dil_h * l.pitch * chunks * 16), col_step = uint32_t(c.dil_w * chunks * 16);
  const uint32_t out_row_step = uint32_t(c.stride_h * l.pitch * chunks * 16), pair_step = 2 * out_row_step;
  const uint32_t lane_at = tile_base + uint32_t(((kTf32 ? 0 : lane / 16 * c.stride_h * l.pitch) +
                                                 (lane % 16) * c.stride_w) * chunks * 16);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int ow0 = int(t % tiles_q) * kTileQ, oh0 = int(t / tiles_q % tiles_p) * kTileP;
    const int64_t n = t / tiles_q / tiles_p;
    __syncthreads();  // the previous tile's window is read
    copy_window(tile, in, l, n, oh0, ow0, int64_t(g0) * c.ICg, chunks);
    sm80::copies_done();
    __syncthreads();
    // A warp takes a group and the tile's kTileP rows: each filter fragment feeds kTileP MMAs. ldmatrix.x4
    // reads two rows' A fragments: lanes 0-15 address row 2i's pixels 0-15, lanes 16-31 row 2i+1's (TF32: one
    // row's, lanes 16-31 at the 8 channels' second chunk). The addresses advance by fixed steps from tap to tap
    // (the window's row pitch, a multiple of 8 pixels, leaves a pixel's swizzle depending on its column alone):
    // no multiplications in the loop.
    for (int gl = warp; gl < l.slice_groups; gl += kThreads / 32) {
      float acc[kTileP][kKG8][4] = {};
      const F* wt = wsm + gl * taps * cg8 * kKG8 * 32 + lane;
      uint32_t row_at = lane_at;
      for (int r = 0; r < c.R; ++r, row_at += row_step) {
        uint32_t at = row_at;
        int column = (lane % 16) * c.stride_w;
        for (int s = 0; s < c.S; ++s, at += col_step, column += c.dil_w, wt += cg8 * kKG8 * 32) {
          const int key = column & l.swizzle;
          for (int kc = 0; kc < cg8; ++kc) {
            if constexpr (kTf32) {
              const uint32_t chunk_at = at + uint32_t(((gl * gchunks + 2 * kc + lane / 16) ^ key) * 16);
              uint32_t a[kTileP][4];
#pragma unroll
              for (int i = 0; i < kTileP; ++i) {
                sm80::ldmatrix_x4<false>(a[i], chunk_at + i * out_row_step);
                sm80::round_tf32(a[i]);
              }
#pragma unroll
              for (int nb = 0; nb < kKG8; ++nb) {
                const uint2 b = wt[(kc * kKG8 + nb) * 32];
#pragma unroll
                for (int i = 0; i < kTileP; ++i) sm80::mma_16x8x8_tf32(acc[i][nb], a[i], b.x, b.y);
              }
            } else {
              const uint32_t chunk_at = at + uint32_t(((gl * cg8 + kc) ^ key) * 16);
              uint32_t a[kTileP][2];
#pragma unroll
              for (int i = 0; i < kTileP; i += 2) {
                sm80::ldmatrix_x4<false>(a[i][0], a[i][1], a[i + 1][0], a[i + 1][1], chunk_at + i / 2 * pair_step);
              }
#pragma unroll
              for (int nb = 0; nb < kKG8; ++nb) {
                const uint32_t b = wt[(kc * kKG8 + nb) * 32];
#pragma unroll
                for (int i = 0; i < kTileP; ++i) mma_16x8x8<T>(acc[i][nb], a[i][0], a[i][1], b);
              }
            }
          }
        }
      }
      // Accumulator (i, j) of a 16 x 8 tile: pixel lane / 4 (+ 8 for the second pair), channel 2 * (lane % 4).
      const int64_t oc = int64_t(g0 + gl) * c.OCg + 2 * (lane % 4);
      float b[kKG8][2];
#pragma unroll
      for (int nb = 0; nb < kKG8; ++nb) {
        b[nb][0] = bias != nullptr ? static_cast<float>(bias[oc + nb * 8]) : 0.f;
        b[nb][1] = bias != nullptr ? static_cast<float>(bias[oc + nb * 8 + 1]) : 0.f;
      }
#pragma unroll
      for (int i = 0; i < kTileP; ++i) {
        const int oh = oh0 + i;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int ow = ow0 + lane / 4 + 8 * h;
          if (oh >= c.OH || ow >= c.OW) continue;
          T* dst = out + ((n * c.OH + oh) * c.OW + ow) * c.OC + oc;
#pragma unroll
          for (int nb = 0; nb < kKG8; ++nb) {
            if constexpr (kTf32) {
              *reinterpret_cast<float2*>(dst + nb * 8) =
                  make_float2(acc[i][nb][2 * h] + b[nb][0], acc[i][nb][2 * h + 1] + b[nb][1]);
            } else {
              *reinterpret_cast<sm80::Pair<T>*>(dst + nb * 8) = {
                  static_cast<T>(acc[i][nb][2 * h] + b[nb][0]), static_cast<T>(acc[i][nb][2 * h + 1] + b[nb][1])};
            }
          }
        }
      }
    }
  }
}

// Weight gradient of groups of 8 output channels: per group and tap, dW[k][c] = sum over pixels of
// grad_out[pixel][k] * x[pixel's tap][c], an MMA of M = 16 (two (tap, 8 input channels) units) x N = 8 (k) x
// K = 16 (pixels of a tile row). Both operands are pixel-major in shared memory (NHWC), so ldmatrix.trans
// hands out the pixel pairs the fragments want. A warp keeps its (group, unit pair) items' accumulators over
// every tile the block takes; the block writes them as its partial sums, partial[blockIdx.x][k][c][tap].
// The fragment addresses are worked out once, not per tile (their divisions by runtime sizes made about half
// the instructions: ResNeXt's 32 x 256 x 56 x 56 groups of 8, float16, 0.138 -> 0.106 ms on an H100), in 24
// registers, so the bounds ask for two blocks an SM (128 registers; 166 without). The copies run a tile
// ahead, into the other of two stages (0.106 -> 0.093 ms there).
template <typename T>
__global__ void __launch_bounds__(kThreads, 2) mma_weight_grad(const T* __restrict__ x, const T* __restrict__ gout,
                                                           float* __restrict__ partial, Launch l) {
  extern __shared__ uint4 smem[];
  const Conv& c = l.c;  // forward orientation: in = x, out = grad_out, OCg = 8
  const int cg8 = c.ICg / 8, taps = c.R * c.S;
  const int chunks = l.slice_groups * cg8, kchunks = l.slice_groups;
  // Two stages, each an input window and a grad_out tile: the next tile's copies fly while this one's MMAs run.
  const int stage = l.tile_rows * l.pitch * chunks + kTileP * kTileQ * kchunks;  // 16-byte chunks
  uint4* window = smem;                                         // [window pixel][chunk ^ (pixel & swizzle)]
  uint4* dy = smem + l.tile_rows * l.pitch * chunks;            // [tile pixel][group ^ (pixel & kswizzle)]
  const uint32_t window_base = sm80::smem_address(window), dy_base = sm80::smem_address(dy);
  const int kswizzle = std::min(8, kchunks) - 1;
  const int g0 = blockIdx.y * l.slice_groups;
  const int units = taps * cg8, pairs = (units + 1) / 2, items = l.slice_groups * pairs;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tiles_q = (c.OW + kTileQ - 1) / kTileQ, tiles_p = (c.OH + kTileP - 1) / kTileP;
  const int64_t tiles = c.N * tiles_p * tiles_q;
  float acc[kMaxItems][4] = {};
  // Each item's fragment addresses in tile row 0, worked out once: tile row i adds i steps (the window's row
  // pitch, a multiple of 8 pixels, leaves a pixel's swizzle the same in every row; grad_out's tile rows are
  // 16 pixels). ldmatrix.x4.trans for A: lanes 0-7 address unit 2 * pair's pixels 0-7, lanes 8-15 the next
  // unit's (the same unit again past the last), lanes 16-31 the same for pixels 8-15; ldmatrix.x2.trans for B:
  // lanes 0-15 the group's 16 grad_out pixels.
  uint32_t a_at[kMaxItems], b_at[kMaxItems];
#pragma unroll
  for (int it = 0; it < kMaxItems; ++it) {
    const int item = std::min(warp + it * (kThreads / 32), items - 1);
    const int gl = item / pairs, pair = item % pairs;
    const int unit = std::min(2 * pair + lane / 8 % 2, units - 1);
    const int tap = unit / cg8, kc = unit % cg8, r = tap / c.S, s = tap % c.S;
    const int q = lane % 8 + 8 * (lane / 16);
    const int pix = r * c.dil_h * l.pitch + q * c.stride_w + s * c.dil_w;
    a_at[it] = window_base + (pix * chunks + ((gl * cg8 + kc) ^ (pix & l.swizzle))) * 16;
    const int dpix = lane % 16;
    b_at[it] = dy_base + (dpix * kchunks + (gl ^ (dpix & kswizzle))) * 16;
  }
  const uint32_t a_step = uint32_t(c.stride_h * l.pitch * chunks * 16), b_step = uint32_t(kTileQ * kchunks * 16);
  const int kshift = __ffs(kchunks) - 1;  // kchunks (groups of the slice) is a power of two
  const auto copy_tile = [&](int64_t t, int buf) {
    const int ow0 = int(t % tiles_q) * kTileQ, oh0 = int(t / tiles_q % tiles_p) * kTileP;
    const int64_t n = t / tiles_q / tiles_p;
    copy_window(window + buf * stage, x, l, n, oh0, ow0, int64_t(g0) * c.ICg, chunks);
    for (int i = threadIdx.x; i < kTileP * kTileQ * kchunks; i += kThreads) {
      const int pix = i >> kshift, j = i & (kchunks - 1);
      const int oh = oh0 + pix / kTileQ, ow = ow0 + pix % kTileQ;
      const bool ok = oh < c.OH && ow < c.OW;  // zeros past the image: their products vanish
      const T* src = ok ? gout + ((n * c.OH + oh) * c.OW + ow) * c.OC + int64_t(g0 + j) * 8 : gout;
      sm80::copy16(dy + buf * stage + pix * kchunks + (j ^ (pix & kswizzle)), src, ok);
    }
    sm80::commit_copies();
  };
  if (blockIdx.x < tiles) copy_tile(blockIdx.x, 0);
  int buf = 0;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x, buf ^= 1) {
    __syncthreads();  // the other stage's previous tile is read
    if (t + gridDim.x < tiles) {
      copy_tile(t + gridDim.x, buf ^ 1);
      sm80::copies_done_but<1>();  // this tile's copies have landed, the next tile's may fly
    } else {
      sm80::copies_done();
    }
    __syncthreads();
    const uint32_t at = uint32_t(buf * stage * 16);
#pragma unroll
    for (int it = 0; it < kMaxItems; ++it) {
      if (warp + it * (kThreads / 32) >= items) continue;
#pragma unroll
      for (int i = 0; i < kTileP; ++i) {
        uint32_t b0, b1, a[4];
        sm80::ldmatrix_x2_trans(b0, b1, b_at[it] + at + i * b_step);
        sm80::ldmatrix_x4<true>(a[0], a[1], a[2], a[3], a_at[it] + at + i * a_step);
        sm80::mma_16x8x16<T>(acc[it], a, b0, b1);
      }
    }
  }
  // The block's partial sums, [k][c][tap] for its groups' output channels (one contiguous run), go out through
  // shared memory in whole 16-byte stores: stored from the fragments, 4 bytes a lane and lanes 9 or more floats
  // apart, they took 12-15 us of the kernel's time (ResNeXt's 256-channel layer at 28x28 and 56x56, float16,
  // H100: 40 -> 25 us and 78 -> 67 us).
  // Accumulator rows: lane / 4 (unit 2 * pair's channel), + 8 (the next unit's); columns k = 2 * (lane % 4) + {0, 1}.
  __syncthreads();  // every warp is done with the tiles
  float* sums = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int it = 0; it < kMaxItems; ++it) {
    const int item = warp + it * (kThreads / 32);
    if (item >= items) continue;
    const int gl = item / pairs, pair = item % pairs;
    const int k = gl * 8 + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int unit = 2 * pair + h;
      if (unit >= units) continue;
      const int tap = unit / cg8, ch = unit % cg8 * 8 + lane / 4;
      sums[(k * c.ICg + ch) * taps + tap] = acc[it][2 * h];
      sums[((k + 1) * c.ICg + ch) * taps + tap] = acc[it][2 * h + 1];
    }
  }
  __syncthreads();
  const int run = l.slice_groups * 8 * c.ICg * taps;  // a multiple of 8 floats
  float4* dst = reinterpret_cast<float4*>(partial + (int64_t(blockIdx.x) * c.OC + int64_t(g0) * 8) * c.ICg * taps);
  for (int i = threadIdx.x; i < run / 4; i += kThreads) dst[i] = reinterpret_cast<const float4*>(sums)[i];
}

// Groups per block: the most that divide `groups`, make a power of two of 16-byte chunks a pixel and keep the
// slice within kSliceChannels and the block's shared memory within kSmemCap (the weight gradient: and its
// accumulators within kMaxItems a warp); slice_groups 0 if none does. Shared memory: the input window, and the
// filter fragments (forward) or the grad_out tile (weight gradient: two stages of both, and at the end the
// block's partial sums).
Launch plan(const Conv& c, bool weight_grad, int esize = 2) {
  Launch l{c, 0, (kTileP - 1) * c.stride_h + (c.R - 1) * c.dil_h + 1,
           (kTileQ - 1) * c.stride_w + (c.S - 1) * c.dil_w + 1, 0, 0, 0};
  l.pitch = (l.tile_cols + 7) / 8 * 8;  // the kernels' fragment addresses rely on it
  const int pairs = (c.R * c.S * c.ICg / 8 + 1) / 2;
  for (int gb = std::min(c.groups, std::max(1, kSliceChannels / c.ICg)); gb >= 1; --gb) {
    const int chunks = gb * c.ICg * esize / 16;
    if (c.groups % gb != 0 || (chunks & (chunks - 1)) != 0 || chunks > kThreads) continue;
    if (weight_grad && (gb * pairs + kThreads / 32 - 1) / (kThreads / 32) > kMaxItems) continue;
    const int64_t window = int64_t(l.tile_rows) * l.pitch * gb * c.ICg * esize;
    const int64_t rest = weight_grad ? int64_t(kTileP) * kTileQ * gb * c.OCg * esize
                                     : int64_t(gb) * c.R * c.S * c.ICg * c.OCg * esize;
    // The weight gradient's two stages of tiles, and room for its partial sums at the end.
    const int64_t bytes =
        weight_grad ? std::max<int64_t>(2 * (window + rest), int64_t(gb) * 8 * c.ICg * c.R * c.S * 4) : window + rest;
    if (bytes <= kSmemCap) {
      l.slice_groups = gb;
      l.smem = bytes;
      break;
    }
  }
  l.swizzle = std::min(8, std::max(1, l.slice_groups * c.ICg * esize / 16)) - 1;  // XOR within the pixel's chunks
  return l;
}

// One wave of resident blocks (x: output tiles, looped over; y: group slices). The kernels' shared memory may
// pass the default 48 KB: opted in once per kernel and device.
template <typename Kernel>
dim3 grid_for(Kernel kernel, const Launch& l) {
  launch::opt_in_shared_memory(kernel);
  const int64_t resident = launch::resident_blocks(kernel, kThreads, l.smem);
  const int64_t slices = l.c.groups / l.slice_groups;
  const int64_t tiles = l.c.N * ((l.c.OH + kTileP - 1) / kTileP) * ((l.c.OW + kTileQ - 1) / kTileQ);
  return dim3(static_cast<unsigned>(std::clamp<int64_t>(resident / slices, 1, tiles)), static_cast<unsigned>(slices));
}

template <typename T, int kKG8>
void launch(const at::Tensor& in, const at::Tensor& wp, const at::Tensor& bias, const at::Tensor& out,
            const Launch& l) {
  const auto kernel = mma_conv<T, kKG8>;
  kernel<<<grid_for(kernel, l), kThreads, l.smem, at::cuda::getCurrentCUDAStream()>>>(
      in.const_data_ptr<T>(), static_cast<const typename Frag<T>::type*>(wp.const_data_ptr()),
      bias.defined() ? bias.const_data_ptr<T>() : nullptr, out.mutable_data_ptr<T>(), l);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

bool takes_weight_grad(const Conv& c, at::ScalarType dtype) {
  if (dtype != at::kHalf && dtype != at::kBFloat16) return false;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  if (c.ICg % 8 != 0 || c.OCg != 8) return false;
  return plan(c, true).slice_groups > 0;
}

at::Tensor weight_grad_partials(const at::Tensor& x, const at::Tensor& grad_out, const Conv& c) {
  const Launch l = plan(c, true);
  at::Tensor partial;
  const auto go = [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = mma_weight_grad<T>;
    const dim3 grid = grid_for(kernel, l);
    partial = at::empty({int64_t(grid.x), c.OC, c.ICg, c.R, c.S}, x.options().dtype(at::kFloat));
    kernel<<<grid, kThreads, l.smem, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<T>(), grad_out.const_data_ptr<T>(), partial.mutable_data_ptr<float>(), l);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (x.scalar_type() == at::kHalf) {
    go(at::Half{});
  } else {
    go(at::BFloat16{});
  }
  return partial;
}

bool takes(const Conv& c, at::ScalarType dtype, bool allow_tf32) {
  const bool tf32 = dtype == at::kFloat && allow_tf32;
  if (dtype != at::kHalf && dtype != at::kBFloat16 && !tf32) return false;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  if (c.ICg % 8 != 0 || c.OCg % 8 != 0 || c.OCg > kMaxOutGroupChannels) return false;
  return plan(c, false, tf32 ? 4 : 2).slice_groups > 0;
}

void run(const at::Tensor& in, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& out, const Conv& c) {
  const int esize = int(in.element_size());
  const Launch l = plan(c, false, esize);
  const int kg8 = c.OCg / 8;
  // Fragment words: one a lane (half types) or two (TF32).
  const int64_t fragments = int64_t(c.groups) * c.R * c.S * (c.ICg / 8) * kg8 * 32;
  auto wp = at::empty({fragments * esize / 2}, in.options().dtype(at::kInt));
  const auto stream = at::cuda::getCurrentCUDAStream();
  const auto pack_and_launch = [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>((fragments + 255) / 256, 4096));
    pack_fragments<T><<<grid, 256, 0, stream>>>(w.const_data_ptr<T>(),
                                                static_cast<typename Frag<T>::type*>(wp.mutable_data_ptr()), c, kg8,
                                                w.stride(0), w.stride(1), w.stride(2), w.stride(3));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    switch (kg8) {
      case 1: return launch<T, 1>(in, wp, bias, out, l);
      case 2: return launch<T, 2>(in, wp, bias, out, l);
      case 3: return launch<T, 3>(in, wp, bias, out, l);
      default: return launch<T, 4>(in, wp, bias, out, l);
    }
  };
  if (in.scalar_type() == at::kHalf) {
    pack_and_launch(at::Half{});
  } else if (in.scalar_type() == at::kBFloat16) {
    pack_and_launch(at::BFloat16{});
  } else {
    pack_and_launch(float{});
  }
}

} // namespace customops::cuda::grouped::mma
