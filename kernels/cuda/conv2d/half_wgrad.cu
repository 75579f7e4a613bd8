// conv2d's weight gradient for float16 and bfloat16 (half_wgrad.h says why a kernel of our own;
// direct_wgrad.cuh the scheme it shares with the TF32 kernel). Both operands are pixel-major in shared
// memory (grad_out's pixels as they are, the input window's), so ldmatrix loads them transposed: an m16n8k16 MMA
// reduces over 16 pixels, two 8-pixel groups of the stage (a row's groups in order, then the next row's), so that
// rows need only be multiples of 8 pixels. Each of the 8 warps accumulates 8 input channels x the block's 64 output
// channels for every tap of the group: per step, 4 A fragments feed each tap's B fragment into 4 MMAs. A pixel's
// 64 elements take 72 (144 bytes), so that ldmatrix's 8 rows of consecutive pixels fall in different banks.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/mma_sm80.cuh"
#include "kernels/cuda/conv2d/direct_wgrad.cuh"
#include "kernels/cuda/conv2d/half_wgrad.h"

namespace customops::cuda::half_wgrad {
namespace {

using namespace direct_wgrad;

constexpr int kChunks = 8;                          // 16-byte chunks a pixel
constexpr int kPixelLanes = kThreads / kChunks;     // pixels one pass of the block's copies covers
constexpr int kPitch = 72;                          // elements a pixel takes in shared memory
constexpr int kPixelBytes = kPitch * 2;
constexpr int kGroupBytes = 8 * kPixelBytes;        // an 8-pixel group
// Stages of up to 256 output pixels (128 measured 2-13% slower, on an H200), pieces of up to 128 pixels of longer
// rows (a 112-pixel row whole: 64-pixel pieces copied 3 window rows for each output row and ran 17% behind
// CUTLASS), and after both stages one group of zeros, the A operand of a stage's last step where its groups are odd.
constexpr Layout kLayout{kPixelBytes, kPixelBytes, 256, 128, kGroupBytes};

// A row-major region of an image to copy into shared memory: `width` pixels a row, the image h x w pixels of
// `pixel` elements, `pitch` elements a pixel in shared memory. Built at each use from the kernel's parameters, so
// that its sizes stay in the constant bank rather than in registers.
struct Region {
  int width, h, w, pixel, pitch;
};

// One thread's share of copying a region (rows x g.width pixels from row `row0` and column `col0` of the image)
// into shared memory, 16 bytes a copy: chunk `chunk` of every kLanes-th pixel from pixel `lane`; zeros outside the
// image (rows or columns out of range, negative ones included) and where !chunk_ok. Offsets within the image
// (32-bit: check_size) are stepped along the walk, as the TF32 kernel's walks are; a zero-filled copy reads the
// image's start. Both of this kernel's regions (grad_out's stage, the input window) take it.
template <typename E, int kLanes>
struct RegionCopies {
  const E* image;  // the image's first pixel, at the tile's first channel
  E* dst;
  int e, end, col, r, at, row0, col0;
  bool row_ok, chunk_ok;

  __device__ __forceinline__ void start(const E* image_, E* dst_, int rows, int row0_, int col0_, int lane, int chunk,
                                        bool chunk_ok_, Region g) {
    constexpr int kChunk = 16 / int(sizeof(E));
    image = image_, row0 = row0_, col0 = col0_, chunk_ok = chunk_ok_;
    e = lane, end = rows * g.width, r = lane / g.width, col = lane % g.width;
    at = ((row0 + r) * g.w + col0 + col) * g.pixel + chunk * kChunk;
    row_ok = chunk_ok && unsigned(row0 + r) < unsigned(g.h);
    dst = dst_ + lane * g.pitch + chunk * kChunk;
  }

  // Issues up to `most` more copies; none once the region is done.
  __device__ __forceinline__ void issue(int most, Region g) {
    for (int i = 0; i < most && e < end; ++i) {
      const bool ok = row_ok && unsigned(col0 + col) < unsigned(g.w);
      sm80::copy16(dst, image + uint32_t(ok ? at : 0), ok);
      e += kLanes, dst += kLanes * g.pitch, at += kLanes * g.pixel, col += kLanes;
      if (col >= g.width) {
        do col -= g.width, at += (g.w - g.width) * g.pixel, ++r;
        while (col >= g.width);
        row_ok = chunk_ok && unsigned(row0 + r) < unsigned(g.h);
      }
    }
  }
};

template <typename T, bool kUnitStrideW>
__global__ void __launch_bounds__(kThreads, 1)
    half_weight_grad(const T* __restrict__ x, const T* __restrict__ dy, float* __restrict__ partial, Dims d) {
  extern __shared__ float4 smem4[];
  T* smem = reinterpret_cast<T*>(smem4);
  int tile = blockIdx.y;
  const int k0 = tile % d.k_tiles * kTileK;
  tile /= d.k_tiles;
  const int c0 = tile % d.c_tiles * kTileC, group = tile / d.c_tiles;
  const int taps = d.R * d.S, t0 = group * kMaxTaps, ntaps = min(kMaxTaps, taps - t0);
  const int r_lo = t0 / d.S;
  const int64_t first = blockIdx.x * d.per_chunk, last = min(d.stages, first + d.per_chunk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int dy_elems = d.tile_p * d.tile_q * kPitch;
  const int stage_elems = dy_elems + d.win_rows * d.win_w * kPitch;

  T* zero = smem + 2 * stage_elems;
  for (int i = threadIdx.x; i < kGroupBytes / 16; i += kThreads) reinterpret_cast<float4*>(zero)[i] = float4{};

  // Where each tap's window starts (bytes), and the taps this lane gives ldmatrix rows for: a 4-matrix load covers
  // taps 2p (lanes 0-15) and 2p + 1 (lanes 16-31), tap 8 a 2-matrix load of its own.
  int tap_at[kMaxTaps];
#pragma unroll
  for (int i = 0; i < kMaxTaps; ++i) {
    const int tap = t0 + min(i, ntaps - 1);
    tap_at[i] = ((tap / d.S - r_lo) * d.dil_h * d.win_w + tap % d.S * d.dil_w) * kPixelBytes;
  }
  int lane_tap[5];
#pragma unroll
  for (int p = 0; p < 4; ++p) lane_tap[p] = lane < 16 ? tap_at[2 * p] : tap_at[2 * p + 1];  // constant indices
  lane_tap[4] = tap_at[8];
  float acc[kMaxTaps][4][4] = {};

  // The copies of a stage (thread i: chunk i % 8 of every 32nd pixel from pixel i / 8), issued a few at a time from
  // within the previous stage's MMA steps.
  const int copy_lane = threadIdx.x / kChunks, copy_chunk = threadIdx.x % kChunks;
  const bool dy_ok = copy_chunk < (d.K - k0) / 8, x_ok = copy_chunk < (d.C - c0) / 8;  // K, C multiples of 8
  RegionCopies<T, kPixelLanes> dy_copies{dy, smem, copy_lane, copy_lane}, x_copies{x, smem, copy_lane, copy_lane};
  const auto dy_region = [&] { return Region{d.tile_q, d.P, d.Q, d.K, kPitch}; };
  const auto window = [&] { return Region{d.win_w, d.H, d.W, d.C, kPitch}; };
  const auto start_copies = [&](Stage st, T* buf) {
    dy_copies.start(dy + int64_t(st.n) * d.P * d.Q * d.K + k0, buf, d.tile_p, st.p0, st.q0, copy_lane, copy_chunk,
                    dy_ok, dy_region());
    x_copies.start(x + int64_t(st.n) * d.H * d.W * d.C + c0, buf + dy_elems, d.win_rows,
                   st.p0 * d.stride_h - d.pad_h + r_lo * d.dil_h, st.q0 * d.stride_w - d.pad_w, copy_lane, copy_chunk,
                   x_ok, window());
  };
  const auto issue_copies = [&](int most) {
    dy_copies.issue(most, dy_region());
    x_copies.issue(most, window());
  };
  constexpr int kAll = std::numeric_limits<int>::max();

  const int stride_w = kUnitStrideW ? 1 : d.stride_w;
  // A lane's ldmatrix rows: pixel lane % 8 of one of the step's two groups. A's matrices (group 0 channels 0-7,
  // 8-15, group 1 channels 0-7, 8-15) come in the MMA's register order, so their lanes take group lane / 16; B's
  // (tap 2p group 0, group 1, tap 2p + 1 group 0, group 1) group lane / 8 % 2. Loaded in another order, the
  // registers needed 4 moves an MMA.
  const int a_parity = lane / 16, b_parity = lane / 8 % 2;
  const uint32_t a_lane = lane % 8 * kPixelBytes + lane / 8 % 2 * 16;
  const uint32_t b_lane = lane % 8 * stride_w * kPixelBytes + warp * 16;
  const uint32_t b_group = 8 * stride_w * kPixelBytes;  // bytes from a group's window pixels to the next group's
  const uint32_t zero_at = sm80::smem_address(zero) + a_lane;
  Stage st = first_stage(d, first);
  if (first < last) start_copies(st, smem), issue_copies(kAll);
  sm80::commit_copies();
  for (int64_t stage = first; stage < last; ++stage, st = next_stage(d, st)) {
    T* buf = smem + (stage - first) % 2 * stage_elems;
    // This stage's copies have landed (this thread's, then everyone's), and every warp is past the previous
    // stage's MMAs, whose buffer the next stage's copies fill.
    sm80::copies_done();
    __syncthreads();
    if (stage + 1 < last) start_copies(next_stage(d, st), smem + (stage + 1 - first) % 2 * stage_elems);
    const int groups = (min(d.tile_q, d.Q - st.q0) + 7) / 8, rows = min(d.tile_p, d.P - st.p0);
    const int total = rows * groups, steps = (total + 1) / 2;
    // Past a row's last group: the rest of the row's tile (a partial stage column) and, for B, the window rows
    // between two output rows.
    const uint32_t a_skip = (d.tile_q / 8 - groups) * kGroupBytes;
    const uint32_t b_skip = d.stride_h * d.win_w * kPixelBytes - groups * b_group;
    const uint32_t b_first = sm80::smem_address(buf + dy_elems) + b_lane;
    // Each lane walks its groups (column within the row, address), two a step, from group a_parity or b_parity.
    // Past the last group (an odd count), A reads zeros and B the window's start.
    int a_col = a_parity, b_col = b_parity;
    uint32_t a_at = sm80::smem_address(buf) + a_lane + a_parity * kGroupBytes, b_at = b_first + b_parity * b_group;
    if (a_col >= groups) a_col -= groups, a_at += a_skip;
    if (b_col >= groups) b_col -= groups, b_at += b_skip;
    const auto run = [&](auto full) {
      for (int step = 0; step < steps; ++step) {
        const uint32_t a_use = 2 * step + a_parity < total ? a_at : zero_at;
        const uint32_t b_use = 2 * step + b_parity < total ? b_at : b_first;
        uint32_t a[4][4], b[kMaxTaps][2];
#pragma unroll
        for (int m = 0; m < 4; ++m) sm80::ldmatrix_x4<true>(a[m], a_use + m * 32);
#pragma unroll
        for (int p = 0; p < 4; ++p) {
          sm80::ldmatrix_x4<true>(b[2 * p][0], b[2 * p][1], b[2 * p + 1][0], b[2 * p + 1][1], b_use + lane_tap[p]);
        }
        sm80::ldmatrix_x2_trans(b[8][0], b[8][1], b_use + lane_tap[4]);
#pragma unroll
        for (int i = 0; i < kMaxTaps; ++i) {
          if (decltype(full)::value || i < ntaps) {
#pragma unroll
            for (int m = 0; m < 4; ++m) sm80::mma_16x8x16<T>(acc[i][m], a[m], b[i][0], b[i][1]);
          }
        }
        a_col += 2, a_at += 2 * kGroupBytes, b_col += 2, b_at += 2 * b_group;
        if (a_col >= groups) {  // twice where a row is one group
          a_col -= groups, a_at += a_skip;
          if (a_col >= groups) a_col -= groups, a_at += a_skip;
        }
        if (b_col >= groups) {
          b_col -= groups, b_at += b_skip;
          if (b_col >= groups) b_col -= groups, b_at += b_skip;
        }
        issue_copies(kCopiesPerStep);
      }
    };
    if (ntaps == kMaxTaps) {
      run(std::true_type{});
    } else {
      run(std::false_type{});
    }
    issue_copies(kAll);
    sm80::commit_copies();
  }
  __syncthreads();  // the last stage's MMAs are done before the epilogue reuses shared memory
  // Accumulator 2h + e of block m: output channel 16m + 8h + g (A's matrices: channels 0-7, then 8-15).
  store_partials(acc, reinterpret_cast<float*>(smem4), partial, d, k0, c0, t0, ntaps,
                 [g](int m, int h) { return 16 * m + 8 * h + g; });
}

template <typename T>
at::Tensor launch(const at::Tensor& grad_out, const at::Tensor& x, const Geometry& g) {
  Dims d = plan(g, kLayout);
  const auto kernel = d.stride_w == 1 ? half_weight_grad<T, true> : half_weight_grad<T, false>;
  launch::opt_in_shared_memory(kernel);
  const int64_t tiles = tiles_of(g);
  // About 4 TFLOPS an SM for a stage.
  const int64_t used = split_into_chunks(d, tiles, launch::resident_blocks(kernel, kThreads, d.smem), 4000.0);
  auto partial = at::empty({used, g.K, g.C, g.R, g.S}, x.options().dtype(at::kFloat));
  kernel<<<dim3(unsigned(used), unsigned(tiles)), kThreads, d.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<T>(), grad_out.const_data_ptr<T>(), partial.mutable_data_ptr<float>(), d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

} // namespace

Refusal supports_weight_grad(at::ScalarType dtype, const Geometry& g) {
  if (dtype != at::kHalf && dtype != at::kBFloat16) return Refusal::kDtype;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return Refusal::kDevice;
  if (g.C % 8 != 0 || g.K % 8 != 0) return Refusal::kAlignment;
  if (check_size(g, kLayout) != Refusal::kNone) return Refusal::kSize;
  // H100, queued, 2026-11-26, float16 (bfloat16 within 3%), channels_last 3x3 batch 64 unless said, this kernel
  // against CUTLASS's (CUSTOMOPS_CONV2D_ALGO=direct and =implicit), ms: 64 -> 64 channels 56x56 0.064 against 0.078
  // (cuDNN 0.048), batch 16 0.030 against 0.042, 112x112 batch 32 0.106 against 0.129, 28x28 0.030 against 0.041,
  // 14x14 0.019 against 0.032, stride 2 112x112 -> 56x56 batch 32 0.059 against 0.063, dilation 2 batch 32 0.044
  // against 0.060, NCHW 0.117 against 0.134 (both through the layout transposes); 32 channels 56x56 0.054 against
  // 0.096; 16 channels 224x224 batch 16 0.220 against 0.308; 1x1 stride 2 64 channels 56x56 0.030 against 0.041;
  // 5x5 32 channels 28x28 0.059 against 0.060. But 7x7 (six tap groups, each copying the window again) 64 channels
  // 14x14 0.053 against 0.033; 64 -> 128 56x56 0.107 against 0.105, 128 -> 64 28x28 0.045 against 0.042, 128
  // channels 56x56 batch 32 0.108 against 0.110 and 28x28 0.071 against 0.052. So CUTLASS keeps more than 64
  // channels on either side and filters of more than one tap group.
  if (std::max(g.C, g.K) > 64 || g.R * g.S > kMaxTaps) return Refusal::kSlower;
  return Refusal::kNone;
}

at::Tensor weight_grad_partials(const at::Tensor& grad_out, const at::Tensor& x, const Geometry& g) {
  at::Tensor partial;
  AT_DISPATCH_SWITCH(x.scalar_type(), "conv2d_half_weight_grad",
                     AT_DISPATCH_CASE(at::kHalf, [&] { partial = launch<c10::Half>(grad_out, x, g); })
                         AT_DISPATCH_CASE(at::kBFloat16, [&] { partial = launch<c10::BFloat16>(grad_out, x, g); }));
  return partial;
}

} // namespace customops::cuda::half_wgrad
