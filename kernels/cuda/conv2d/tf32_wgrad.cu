// conv2d's weight gradient in TF32 (tf32_wgrad.h says why a kernel of our own; direct_wgrad.cuh
// the scheme it shares with the half types' kernel). Each warp accumulates 8 input channels x the block's 64
// output channels for every tap of the group: per 8 pixels, 4 A fragments (grad_out) feed each tap's B fragment
// (the input, shifted by the tap) into 4 m16n8k8 MMAs. An input pixel's 64 floats take 72 in shared memory, so
// that a B fragment's 4 pixels x 8 channels fall in 32 different banks.
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
#include "kernels/cuda/conv2d/tf32_wgrad.h"

namespace customops::cuda::tf32 {
namespace {

using namespace direct_wgrad;

constexpr int kChunks = kTileC / 4;        // 16-byte chunks a pixel (kTileK == kTileC)
constexpr int kPixelLanes = kThreads / kChunks;  // window pixels one pass of the block's copies covers
constexpr int kPairs = kTileK / 2;         // 8-byte channel pairs of a grad_out pixel
constexpr int kGroupFloats = 8 * kTileK;   // floats of 8 grad_out pixels (an MMA step's A) in shared memory
constexpr int kPitch = 72;                 // floats an input pixel takes in shared memory
// Stages of up to 128 output pixels (64 measured 12-17% slower: more stages and barriers, more window rows copied
// per output row), pieces of at most 64 pixels of longer rows.
constexpr Layout kLayout{kTileK * 4, kPitch * 4, 128, 64, 0};

// Where channel pair j of a stage's grad_out pixel `pix` sits (floats). The MMA's row g of m16 block m stands for
// output channel 8g + 2m and row g + 8 for 8g + 2m + 1, so a lane's A fragment for block m is pair 4g + m of
// pixels t and t + 4 of the step's 8: the two pairs sit side by side as one 16-byte unit, one load a fragment. The
// units of pixel t are XOR-ed by t so that the 8 lanes of a load's phase (two g, four t) read all 32 banks.
__device__ __forceinline__ int dy_pair_at(int pix, int j) {
  const int t = pix % 4;
  return pix / 8 * kGroupFloats + (t * kPairs + (j ^ t)) * 4 + pix / 4 % 2 * 2;
}

// A stage in shared memory: grad_out's tile_p x tile_q pixels (64 floats a pixel, pairs placed by dy_pair_at), then
// the input window (kPitch floats a pixel). The copies walk rows: thread i copies pair i % 32 of every 8th grad_out
// pixel from pixel i / 32 (all in the same place of their 8-pixel groups, tile_q being a multiple of 8) and chunk
// i % 16 of every 16th window pixel from pixel i / 16, so that each copy costs an add or two (a copy's own index
// arithmetic was a third of the kernel's instructions). The window's walk is written out here rather than
// half_wgrad.cu's RegionCopies: through that struct this kernel took 2-3% longer (H100, queued, 256 -> 256
// 56x56 batch 32 0.793 against 0.776 ms; 243-244 registers against 245-246, scheduled differently). The fragments are
// rounded to TF32 as they load.
// kUnitStrideW (stride_w == 1) makes the offsets between B words constants the loads carry.
template <bool kUnitStrideW>
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
  const int dy_floats = d.tile_p * d.tile_q * kTileK;
  const int k_pairs = (d.K - k0) / 2, c_chunks = (d.C - c0) / 4;  // K and C are multiples of 4

  // Where each tap's B fragments start in the window (bytes), the same for every thread.
  int tap_at[kMaxTaps];
#pragma unroll
  for (int i = 0; i < kMaxTaps; ++i) {
    const int tap = t0 + min(i, ntaps - 1);
    tap_at[i] = ((tap / d.S - r_lo) * d.dil_h * d.win_w + tap % d.S * d.dil_w) * kPitch * 4;
  }
  float acc[kMaxTaps][4][4] = {};

  const int dy_lane = threadIdx.x / kPairs, dy_pair = threadIdx.x % kPairs;
  const int dy_pair_slot = dy_pair_at(dy_lane, dy_pair);  // pixel dy_lane + 8i sits i groups further
  const int x_lane = threadIdx.x / kChunks, x_chunk = threadIdx.x % kChunks;
  const bool dy_ok = dy_pair < k_pairs, x_ok = x_chunk < c_chunks;
  const int x_r0 = x_lane / d.win_w, x_col0 = x_lane % d.win_w;  // this thread's first window pixel
  // The copies of a stage, issued a few at a time from within the previous stage's MMA steps (issued all at once,
  // every warp of the block spent the same stretch on them, the tensor cores idle). Offsets within image n (32-bit:
  // check_size), stepped along each walk; a zero-filled copy reads from the image's start.
  const int dy_end = d.tile_p * d.tile_q, x_end = d.win_rows * d.win_w;
  const float *dy_n = dy, *x_n = x;
  float *dy_dst = smem, *x_dst = smem;
  int dy_e = dy_end, dy_col = 0, dy_r = 0, dy_at = 0, x_e = x_end, x_col = 0, x_r = 0, x_at = 0;
  int copy_p0 = 0, copy_q0 = 0, ih0 = 0, iw0 = 0;
  bool dy_row_ok = false, x_row_ok = false;
  const auto start_copies = [&](Stage st, float* buf) {
    copy_p0 = st.p0, copy_q0 = st.q0;
    dy_n = dy + int64_t(st.n) * d.P * d.Q * d.K;
    dy_e = dy_lane, dy_col = dy_lane, dy_r = 0, dy_at = (st.p0 * d.Q + st.q0 + dy_col) * d.K + k0 + 2 * dy_pair;
    dy_row_ok = dy_ok && st.p0 < d.P;
    dy_dst = buf + dy_pair_slot;
    x_n = x + int64_t(st.n) * d.H * d.W * d.C;
    ih0 = st.p0 * d.stride_h - d.pad_h + r_lo * d.dil_h, iw0 = st.q0 * d.stride_w - d.pad_w;
    x_e = x_lane, x_r = x_r0, x_col = x_col0, x_at = ((ih0 + x_r) * d.W + iw0 + x_col) * d.C + c0 + 4 * x_chunk;
    x_row_ok = x_ok && unsigned(ih0 + x_r) < unsigned(d.H);
    x_dst = buf + dy_floats + x_lane * kPitch + 4 * x_chunk;
  };
  const auto issue_copies = [&](int most) {
    for (int i = 0; i < most && dy_e < dy_end; ++i) {
      const bool ok = dy_row_ok && copy_q0 + dy_col < d.Q;
      sm80::copy8(dy_dst, dy_n + uint32_t(ok ? dy_at : 0), ok);
      dy_e += 8, dy_dst += kGroupFloats, dy_at += 8 * d.K, dy_col += 8;  // tile_q is a multiple of 8
      if (dy_col >= d.tile_q) {
        dy_col -= d.tile_q, dy_at += (d.Q - d.tile_q) * d.K;
        dy_row_ok = dy_ok && copy_p0 + ++dy_r < d.P;
      }
    }
    for (int i = 0; i < most && x_e < x_end; ++i) {
      const bool ok = x_row_ok && unsigned(iw0 + x_col) < unsigned(d.W);
      sm80::copy16(x_dst, x_n + uint32_t(ok ? x_at : 0), ok);
      x_e += kPixelLanes, x_dst += kPixelLanes * kPitch, x_at += kPixelLanes * d.C, x_col += kPixelLanes;
      if (x_col >= d.win_w) {
        do x_col -= d.win_w, x_at += (d.W - d.win_w) * d.C, ++x_r;
        while (x_col >= d.win_w);
        x_row_ok = x_ok && unsigned(ih0 + x_r) < unsigned(d.H);
      }
    }
  };
  constexpr int kAll = std::numeric_limits<int>::max();

  // This lane's A fragment of m16 block m in a step's 8 pixels (dy_pair_at), bytes.
  int a_at[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) a_at[m] = (t * kPairs + ((4 * g + m) ^ t)) * 16;
  const int stride_w = kUnitStrideW ? 1 : d.stride_w;
  // Bytes from a B fragment's first word to its second (output pixel t + 4), and from a step to the next.
  const int b_next = 4 * stride_w * kPitch * 4, b_step = 8 * stride_w * kPitch * 4;
  const int floats = dy_floats + d.win_rows * d.win_w * kPitch;
  Stage st = first_stage(d, first);
  if (first < last) start_copies(st, smem), issue_copies(kAll);
  sm80::commit_copies();
  for (int64_t stage = first; stage < last; ++stage, st = next_stage(d, st)) {
    float* buf = smem + (stage - first) % 2 * floats;
    // This stage's copies have landed (this thread's, then everyone's), and every warp is past the previous
    // stage's MMAs, whose buffer the next stage's copies fill.
    sm80::copies_done();
    __syncthreads();
    if (stage + 1 < last) start_copies(next_stage(d, st), smem + (stage + 1 - first) % 2 * floats);
    const int steps = (min(d.tile_q, d.Q - st.q0) + 7) / 8, rows = min(d.tile_p, d.P - st.p0);
    // Steps along each row (a stage's rows one after another in shared memory); past a row's last step, the rest of
    // the row's tile (a partial stage column) and, for B, the window rows between two output rows.
    const uint32_t a_skip = (d.tile_q / 8 - steps) * kGroupFloats * 4;
    const uint32_t b_skip = d.stride_h * d.win_w * kPitch * 4 - steps * b_step;
    uint32_t a_row = sm80::smem_address(buf);
    uint32_t b_row = sm80::smem_address(buf + dy_floats + t * stride_w * kPitch + warp * 8 + g);
    // A step: A (16 output channels x 8 pixels a block) and B (8 pixels x 8 input channels: the window pixel that
    // output pixel t or t + 4 reads through each tap), rounded to TF32 as they load, then the MMAs. Loading the
    // next step's fragments during this step's MMAs (registers for two sets) measured no faster. A whole tap group
    // (3x3 filters) runs without the per-tap conditions.
    const auto run = [&](auto full) {
      for (int it = 0, step = 0; it < rows * steps; ++it) {
        uint32_t a[4][4], b[kMaxTaps][2];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          sm80::load_shared(a[m], a_row + a_at[m]);
          sm80::round_tf32(a[m]);
        }
#pragma unroll
        for (int i = 0; i < kMaxTaps; ++i) {
          const uint32_t at = b_row + tap_at[i];
          b[i][0] = sm80::tf32_operand(sm80::load_shared(at));
          b[i][1] = sm80::tf32_operand(sm80::load_shared(at + b_next));
        }
#pragma unroll
        for (int i = 0; i < kMaxTaps; ++i) {
          if (decltype(full)::value || i < ntaps) {
#pragma unroll
            for (int m = 0; m < 4; ++m) sm80::mma_16x8x8_tf32(acc[i][m], a[m], b[i][0], b[i][1]);
          }
        }
        a_row += kGroupFloats * 4, b_row += b_step;
        if (++step == steps) step = 0, a_row += a_skip, b_row += b_skip;
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
  // Accumulator 2h + e of block m: output channel 8g + 2m + h (dy_pair_at's rows).
  store_partials(acc, smem, partial, d, k0, c0, t0, ntaps, [g](int m, int h) { return 8 * g + 2 * m + h; });
}

} // namespace

Refusal supports_weight_grad(at::ScalarType dtype, const Geometry& g, bool channels_last) {
  if (dtype != at::kFloat) return Refusal::kDtype;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return Refusal::kDevice;
  if (g.C % 4 != 0 || g.K % 4 != 0) return Refusal::kAlignment;
  if (check_size(g, kLayout) != Refusal::kNone) return Refusal::kSize;
  // Where both channel counts are large the explicit path's im2col costs less next to its GEMM (cuBLAS near the
  // tensor cores' rate), and this kernel runs at 100-150 TFLOPS (mma.sync TF32 alone: 323 measured). H100, queued,
  // 2026-11-26, this kernel against the explicit path (CUSTOMOPS_CONV2D_ALGO=implicit and =explicit), batch 64
  // unless said: channels_last 64 -> 64 56x56 0.116 against 0.511 ms (cuDNN 0.159), 128 28x28 0.124 against 0.323,
  // 256 14x14 0.132 against 0.272, 256 56x56 batch 32 0.800 against 1.184, stride 2 256 56x56 -> 28x28 batch 32
  // 0.397 against 0.440, 512 7x7 0.159 against 0.741, 512 14x14 0.485 against 0.888, 512 28x28 batch 32 0.904
  // against 0.904; NCHW, where this kernel's operands go through transposes and the explicit path reads NCHW as it
  // is: 64 56x56 0.205 against 0.417, 128 28x28 0.175 against 0.267, 256 14x14 0.159 against 0.233, 256 56x56
  // batch 32 0.966 against 1.010, 512 14x14 0.527 against 0.808, but stride 2 128 112x112 -> 56x56 batch 32 0.632
  // against 0.558 (the input's transpose is 4 times the output's). So the explicit path keeps more than 196 output
  // pixels an image with more than 256 channels on both sides, or with more than 64 and a stride for NCHW inputs.
  const int64_t fewest = std::min(g.C, g.K), pixels = g.P * g.Q;
  const bool strided = g.stride_h > 1 || g.stride_w > 1;
  if (pixels > 196 && (fewest > 256 || (!channels_last && strided && fewest > 64))) return Refusal::kSlower;
  return Refusal::kNone;
}

at::Tensor weight_grad_partials(const at::Tensor& grad_out, const at::Tensor& x, const Geometry& g) {
  Dims d = plan(g, kLayout);
  const auto kernel = g.stride_w == 1 ? tf32_weight_grad<true> : tf32_weight_grad<false>;
  launch::opt_in_shared_memory(kernel);
  const int64_t tiles = tiles_of(g);
  // About 2 TFLOPS an SM for a stage.
  const int64_t used = split_into_chunks(d, tiles, launch::resident_blocks(kernel, kThreads, d.smem), 2000.0);
  auto partial = at::empty({used, g.K, g.C, g.R, g.S}, x.options());
  kernel<<<dim3(unsigned(used), unsigned(tiles)), kThreads, d.smem, at::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<float>(), grad_out.const_data_ptr<float>(), partial.mutable_data_ptr<float>(), d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

} // namespace customops::cuda::tf32
