// A batch of matrices transposed through shared-memory tiles, so that both the reads and the writes walk
// consecutive addresses: NCHW is (N, C, H*W), NHWC is (N, H*W, C).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include "kernels/cuda/common/device_guard.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common/memory_format.h"

namespace customops::cuda {
namespace {

constexpr int kTile = 32;     // a warp reads or writes one tile row
constexpr int kRowsPerPass = 8;  // 256 threads: each moves kTile / kRowsPerPass elements of a tile

// dst[b][j][i] = src[b][i][j] for src (B, R, S) and dst (B, S, R), both dense. One block per tile at a time
// (grid-stride over every tile of every matrix). The shared tile holds opmath values (float for the half types:
// exact, and 4-byte slots with an odd row pitch keep the column reads free of bank conflicts). (64 x 64 tiles for
// float32, 16 elements a thread, were slower on an H100: 0.115 against 0.083 ms for 32x64x112x112.)
template <typename scalar_t>
__global__ void transpose_batch(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, int64_t B, int64_t R,
                                int64_t S) {
  using slot_t = at::opmath_type<scalar_t>;
  __shared__ slot_t tile[kTile][kTile + 1];
  const int64_t tiles_r = (R + kTile - 1) / kTile, tiles_s = (S + kTile - 1) / kTile;
  const int64_t tiles = B * tiles_r * tiles_s;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (tiles_r * tiles_s), rest = t % (tiles_r * tiles_s);
    const int64_t r0 = rest / tiles_s * kTile, s0 = rest % tiles_s * kTile;
    const scalar_t* from = src + b * R * S;
    scalar_t* to = dst + b * R * S;
    for (int k = ty; k < kTile; k += kRowsPerPass) {
      if (r0 + k < R && s0 + tx < S) tile[k][tx] = static_cast<slot_t>(from[(r0 + k) * S + s0 + tx]);
    }
    __syncthreads();
    for (int k = ty; k < kTile; k += kRowsPerPass) {
      if (s0 + k < S && r0 + tx < R) to[(s0 + k) * R + r0 + tx] = static_cast<scalar_t>(tile[tx][k]);
    }
    __syncthreads();  // the tile is refilled on the next pass
  }
}

// The same for 2-byte types with R and S even, in 64 x 64 tiles of 4-byte words: a thread loads a pair of
// neighbouring elements from each of two neighbouring rows, swaps them into the two transposed pairs in registers
// (byte permutes) and stores words, so that every global access is a whole 128-byte line a warp and the shared
// tile moves 4-byte words, no conversions. (The 32 x 32 tiles above ran at 0.70 TB/s on an H100 for
// 32x256x56x56 float16; pairs staged as two floats, 1.0 TB/s.)
constexpr int kPairTile = 64;

template <typename scalar_t>
__global__ void __launch_bounds__(kTile * kRowsPerPass) transpose_pairs(const scalar_t* __restrict__ src,
                                                                       scalar_t* __restrict__ dst, int64_t B,
                                                                       int64_t R, int64_t S) {
  static_assert(sizeof(scalar_t) == 2);
  // words[c][p]: the elements of tile rows 2p and 2p + 1 in tile column c, the first in the low half. An odd
  // pitch: the stores meet two-way bank conflicts at most, the loads none.
  __shared__ uint32_t words[kPairTile][kPairTile / 2 + 1];
  const int64_t tiles_r = (R + kPairTile - 1) / kPairTile, tiles_s = (S + kPairTile - 1) / kPairTile;
  const int64_t tiles = B * tiles_r * tiles_s;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t b = t / (tiles_r * tiles_s), rest = t % (tiles_r * tiles_s);
    const int64_t r0 = rest / tiles_s * kPairTile, s0 = rest % tiles_s * kPairTile;
    const auto* from = reinterpret_cast<const uint32_t*>(src + b * R * S);
    auto* to = reinterpret_cast<uint32_t*>(dst + b * R * S);
    const bool s_in = s0 + 2 * tx < S;  // S even: a pair is whole or out
#pragma unroll
    for (int p = ty; p < kPairTile / 2; p += kRowsPerPass) {
      const int64_t r = r0 + 2 * p;  // R even: rows r and r + 1 are both in or both out
      if (r < R && s_in) {
        const uint32_t u = from[(r * S + s0) / 2 + tx], v = from[((r + 1) * S + s0) / 2 + tx];
        words[2 * tx][p] = __byte_perm(u, v, 0x5410);      // column s0 + 2tx: rows r, r + 1
        words[2 * tx + 1][p] = __byte_perm(u, v, 0x7632);  // column s0 + 2tx + 1
      }
    }
    __syncthreads();
    const bool r_in = r0 + 2 * tx < R;
#pragma unroll
    for (int c = ty; c < kPairTile; c += kRowsPerPass) {
      if (s0 + c < S && r_in) to[((s0 + c) * R + r0) / 2 + tx] = words[c][tx];
    }
    __syncthreads();  // the tile is refilled on the next pass
  }
}

// The same where one side is narrow (at most kNarrow: an RGB image's 3 channels), which would leave a tile's
// threads mostly idle (3 of 32 rows: 0.13 ms, 0.15 TB/s, for 32x3x224x224 float16 on an H100; this, 0.012): a
// thread per position along the long side moves its few elements; a warp's accesses of each stay within a few
// lines.
constexpr int64_t kNarrow = 8;

template <typename scalar_t>
__global__ void transpose_narrow(const scalar_t* __restrict__ src, scalar_t* __restrict__ dst, int64_t B, int64_t R,
                                 int64_t S) {
  const bool narrow_rows = R <= S;  // a thread per column j (moving R elements) or per row i (moving S)
  const int64_t along = narrow_rows ? S : R, across = narrow_rows ? R : S;
  const int64_t total = B * along;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = t / along, k = t % along;
    const scalar_t* from = src + b * R * S;
    scalar_t* to = dst + b * R * S;
    for (int64_t m = 0; m < across; ++m) {
      const int64_t i = narrow_rows ? m : k, j = narrow_rows ? k : m;
      to[j * R + i] = from[i * S + j];
    }
  }
}

void transpose(const at::Tensor& src, const at::Tensor& dst, int64_t B, int64_t R, int64_t S) {
  const bool pairs = src.element_size() == 2 && R % 2 == 0 && S % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(src.const_data_ptr()) % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(dst.const_data_ptr()) % 4 == 0;
  const int64_t edge = pairs ? kPairTile : kTile;
  const int64_t tiles = B * ((R + edge - 1) / edge) * ((S + edge - 1) / edge);
  if (tiles == 0) return;
  // Enough resident blocks to cover the memory latency; the grid-stride loop takes the rest.
  const int64_t most = int64_t{at::cuda::getCurrentDeviceProperties()->multiProcessorCount} * 16;
  const dim3 grid(static_cast<unsigned>(std::min(tiles, most)));
  const dim3 block(kTile, kRowsPerPass);
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, src.scalar_type(), "customops::to_format", [&] {
    if (std::min(R, S) <= kNarrow) {
      constexpr int kThreads = 256;
      const int64_t blocks = std::min<int64_t>((B * std::max(R, S) + kThreads - 1) / kThreads, most);
      transpose_narrow<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          src.const_data_ptr<scalar_t>(), dst.mutable_data_ptr<scalar_t>(), B, R, S);
      return;
    }
    if constexpr (sizeof(scalar_t) == 2) {
      if (pairs) {
        transpose_pairs<scalar_t><<<grid, block, 0, stream>>>(src.const_data_ptr<scalar_t>(),
                                                              dst.mutable_data_ptr<scalar_t>(), B, R, S);
        return;
      }
    }
    transpose_batch<scalar_t><<<grid, block, 0, stream>>>(src.const_data_ptr<scalar_t>(),
                                                          dst.mutable_data_ptr<scalar_t>(), B, R, S);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

at::Tensor to_format(const at::Tensor& t, at::MemoryFormat format) {
  TORCH_CHECK(format == at::MemoryFormat::Contiguous || format == at::MemoryFormat::ChannelsLast,
              "customops::to_format: expected format to be Contiguous or ChannelsLast, got ", format);
  TORCH_CHECK(format == at::MemoryFormat::Contiguous || t.dim() == 4,
              "customops::to_format: expected a 4-D tensor for channels_last, got ", t.dim(), "-D");
  if (t.is_contiguous(format)) return t;
  const bool floating = at::isFloatingType(t.scalar_type());
  if (!t.is_cuda() || t.dim() != 4 || !floating) return t.contiguous(format);
  const bool to_nhwc = format == at::MemoryFormat::ChannelsLast;
  // Only between the two dense layouts; anything else (slices, expanded tensors) is ATen's.
  if (!(to_nhwc ? t.is_contiguous() : t.is_contiguous(at::MemoryFormat::ChannelsLast))) {
    return t.contiguous(format);
  }
  const KernelGuard guard(t.device());
  auto out = at::empty(t.sizes(), t.options().memory_format(format));
  const int64_t N = t.size(0), C = t.size(1), HW = t.size(2) * t.size(3);
  if (to_nhwc) {
    transpose(t, out, N, C, HW);
  } else {
    transpose(t, out, N, HW, C);
  }
  return out;
}

} // namespace customops::cuda
