// depthwise_conv2d on CUDA, channels_last, float16 and bfloat16, on tensor
// cores: the forward and the unit-stride input gradient (flipped taps), for
// windows of more than 9 taps up to 9x9 at unit stride and dilation.
//
// One kernel row of a depthwise window is a Toeplitz matrix product: for one
// channel, 16 output rows and 8 output columns,
//   out[m, n] += sum over k < 16 of in[m + i, x0 + k] * B_i[k, n],
//   B_i[k, n] = tap(i, k - n) where 0 <= k - n < kw, else 0,
// an m16n8k16 MMA with float accumulators (8 outputs and kw - 1 more inputs
// fit K = 16 up to kw = 9). Only a fraction of each MMA's products are taps
// (at 7x7, 7 of 16), which does not matter: an H100's tensor cores do these
// in a few percent of the time the input takes to arrive, where the CUDA-core
// kernels issue an FMA a tap and output and are bound by issue (ConvNeXt's
// 7x7 forward in float16 ran at 19% of the copy bandwidth, slower than
// float32).
//
// NHWC keeps a pixel's channels together; an MMA wants one channel's rows and
// columns. A block owns 16 channels (32 bytes of each pixel), an output tile
// of TW = 8 * NT columns and a run of 16 * MT output rows counted across the
// images (image after image: small planes fill the M dimension with several
// images). It loads the input rows the run reads (each image's rows with the
// window's halo, zeros outside the image), two neighbouring columns' 16 bytes
// a thread, and stores them transposed into shared memory (a byte permute
// joins a channel's two columns into one word), each staged row holding the
// tile's columns of each channel contiguously, so that ldmatrix reads an MMA's
// A operand as 8x8 tiles of one channel. A warp
// owns a pair of the channels and all the block's outputs of the pair: for
// each kernel row and channel it slides along the tile, reusing each 8x8 tile
// as the next MMA's left half, with the B operand built once per kernel row
// from the taps. The results (both channels of a pixel in one word) go to a
// shared-memory tile, its words swizzled by output row so that neither those
// stores nor the 16-byte reads that follow conflict, and from there to the
// output 16 bytes at a time.
//
// A Toeplitz zero times an infinite or NaN input is NaN, where the window's
// taps never read that input: a block whose staged input holds such a value
// computes its tile with FMAs over the window's taps instead, so outputs stay
// those of the definition.
//
// Measured on an H100 (ConvNeXt-T's 96ch 56x56 7x7 layer, batch 64, float16,
// queued; python -m customops.benchmark.depthwise_passes --only convnext):
// forward 0.066 ms against the row kernels' 0.124 and cuDNN's 0.139, input
// gradient 0.066 against 0.124 and 0.339; 41% of the copy bandwidth. The
// staging is most of the instructions: its first version (a thread a column,
// 16 two-byte stores and 8 three-instruction inf/NaN checks for 32 bytes)
// took 0.072 ms.
#include "kernels/cuda/depthwise_conv2d/nhwc_mma.cuh"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/mma_sm80.cuh"

namespace customops::cuda::depthwise_nhwc::mma {
namespace {

constexpr int kThreads = 256;           // 8 warps, one a pair of the chunk's channels
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 16;              // channels a block owns
constexpr int kWindow = 9;              // largest kh and kw
constexpr int kTiles = 8;               // M-tiles x N-tiles a warp accumulates, for each of its two channels
constexpr int kSmemBudget = 110 << 10;  // two blocks a multiprocessor (of an H100's 228 KB)

struct Args {
  const void* src;
  const void* weight;  // (channels, 1, kh, kw)
  const void* bias;    // nullptr or (channels)
  void* dst;
  int64_t rows;  // batch * dst_h: output rows, image after image
  int channels, src_h, src_w, dst_h, dst_w, kh, kw, ph, pw;
  int chunks, runs, mt;       // mt: M-tiles (16 output rows) a block
  int w_bytes, in_bytes;      // shared memory: taps, staged rows (then the output tile)
  bool flipped;
};

// The staged input in shared memory, for tiles of NT MMA columns: staged row s
// holds the kCols = 8 * NT + 8 columns the tile reads of each of the block's
// 16 channels, channel c at row(s) + slot(c), its columns contiguous (an
// ldmatrix row is 8 of them). Lanes 2k and 2k + 1 store channels c and c + 8
// with one instruction: the 32-element gap before channel 8 puts those 16
// banks apart. 8 more elements make the row stride an odd multiple of 16
// bytes, so the 8 rows of an ldmatrix tile (consecutive staged rows) fall in
// different banks.
template <int NT>
struct Layout {
  static constexpr int kTW = 8 * NT, kCols = kTW + 8;
  static constexpr int kRow = 16 * kCols + 40;  // elements between staged rows
  static constexpr int slot(int c) { return c * kCols + (c >= 8 ? 32 : 0); }
  static_assert(kCols % 8 == 0 && (2 * kRow / 16) % 2 == 1, "bank layout");
};

// A block's run of output rows (16 * mt, counted over the batch) and the rows
// it stages, image by image: the first image's part of the run (output rows
// oy0 .. oy0 + len0) with the window's kh - 1 more, then whole images of
// dst_h + kh - 1 rows, the last one possibly cut short.
struct Run {
  int64_t v0, n0;  // first output row (of batch * dst_h) and its image
  int valid;       // output rows of the run inside the batch
  int oy0, len0, first, whole, dst_h, kh, ph;

  __device__ Run(const Args& a, int64_t run)
      : v0(run * 16 * a.mt), n0(v0 / a.dst_h), dst_h(a.dst_h), kh(a.kh), ph(a.ph) {
    valid = int(std::min<int64_t>(16 * a.mt, a.rows - v0));
    oy0 = int(v0 - n0 * a.dst_h);
    len0 = std::min(dst_h - oy0, valid);
    first = len0 + kh - 1;
    whole = dst_h + kh - 1;
  }

  // Staged row read by output row m of the run at kernel row 0; rows past
  // the batch read row 0 (their results are dropped).
  __device__ int base(int m) const {
    if (m >= valid) return 0;
    if (m < len0) return m;
    const int r = m - len0;
    return first + (r / dst_h) * whole + r % dst_h;
  }

  __device__ int staged() const {
    if (valid <= len0) return first;
    const int r = valid - len0, part = r % dst_h;
    return first + (r / dst_h) * whole + (part > 0 ? part + kh - 1 : 0);
  }

  // The image (from n0) and input row of staged row s.
  __device__ void source(int s, int& image, int& y) const {
    if (s < first) {
      image = 0, y = oy0 - ph + s;
    } else {
      const int r = s - first;
      image = 1 + r / whole, y = r % whole - ph;
    }
  }
};

template <typename T>
__device__ __forceinline__ uint16_t bits(T v) {
  uint16_t b;
  memcpy(&b, &v, sizeof(b));
  return b;
}

// acc + x * 0 for a word of two T: zero stays zero unless x holds an infinity or a NaN.
template <typename T>
__device__ __forceinline__ uint32_t times_zero_plus(uint32_t x, uint32_t acc) {
  uint32_t r = acc;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, c10::Half>) {
    asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(x), "r"(0u), "r"(acc));
  } else {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(x), "r"(0u), "r"(acc));
  }
#endif
  return r;
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  return uint32_t(bits(static_cast<T>(lo))) | uint32_t(bits(static_cast<T>(hi))) << 16;
}

// Thread (warp p, lane): channels c0 + 2p and + 1; NT N-tiles of 8 output
// columns, up to kTiles / NT M-tiles (a.mt of them) of 16 output rows.
template <typename T, int NT>
__global__ void __launch_bounds__(kThreads, 2) mma_corr_kernel(Args a) {
  using L = Layout<NT>;
  constexpr int kMT = kTiles / NT, TW = L::kTW;
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_w = reinterpret_cast<T*>(smem);                              // [kChunk][kh][kw], flipped as used
  uint16_t* s_in = reinterpret_cast<uint16_t*>(smem + a.w_bytes);   // staged rows (Layout)
  uint32_t* s_out = reinterpret_cast<uint32_t*>(smem + a.w_bytes + a.in_bytes);  // [16 mt][TW][8 words]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  int64_t b = blockIdx.x;
  const int c0 = int(b % a.chunks) * kChunk;
  b /= a.chunks;
  const Run run(a, b % a.runs);
  const int ox0 = int(b / a.runs) * TW, x0 = ox0 - a.pw;
  const int taps = a.kh * a.kw;
  const T* weight = static_cast<const T*>(a.weight);
  for (int e = tid; e < kChunk * taps; e += kThreads) {
    const int cl = e / taps, tap = e - cl * taps, c = c0 + cl;
    s_w[e] = c < a.channels ? weight[int64_t(c) * taps + (a.flipped ? taps - 1 - tap : tap)] : T(0);
  }

  // Staging: warp w stages rows w, w + 8, ...; lane pair k (lanes 2k, 2k + 1)
  // columns 2k and 2k + 1 of each 32-column pass, lane 2k + h channels 8h to
  // 8h + 7 of both. One byte permute joins a channel's two columns into a
  // word, so a 16-byte load of each column becomes 8 word stores, one per
  // channel slot (immediate offsets), where one column's values took 16
  // two-byte stores. kRows rows at a time: 12 loads in flight.
  constexpr int kCols = L::kCols, kJ = (kCols + 31) / 32, kRows = kJ == 1 ? 6 : kJ == 2 ? 3 : 2;
  const T* src = static_cast<const T*>(a.src);
  const int staged = run.staged(), pair = lane >> 1, h = lane & 1;
  const bool chan = c0 + 8 * h < a.channels;
  int x_of[kJ];
  bool live[kJ];
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int col = 32 * j + 2 * pair;
    x_of[j] = x0 + col;
    live[j] = col < kCols;
  }
  // x * 0 + acc: stays zero unless some x is an infinity or a NaN.
  uint32_t nonfinite[4] = {0, 0, 0, 0};
  uint32_t* s_words = reinterpret_cast<uint32_t*>(s_in) + (L::slot(8 * h) + 2 * pair) / 2;
  for (int s0 = warp; s0 < staged; s0 += kWarps * kRows) {
    uint4 v[kRows][kJ][2];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int s = s0 + r * kWarps;
      int image = 0, y = -1;
      if (s < staged) run.source(s, image, y);
      const bool row_ok = y >= 0 && y < a.src_h && chan;
      const T* row = src + (((run.n0 + image) * a.src_h + y) * int64_t(a.src_w)) * a.channels + c0 + 8 * h;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int x = x_of[j] + e;
          v[r][j][e] = make_uint4(0, 0, 0, 0);
          if (live[j] && row_ok && x >= 0 && x < a.src_w) {
            v[r][j][e] = *reinterpret_cast<const uint4*>(row + int64_t(x) * a.channels);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int s = s0 + r * kWarps;
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        if (s < staged && live[j]) {
          uint32_t* d = s_words + (s * L::kRow + 32 * j) / 2;
          const uint32_t l[4] = {v[r][j][0].x, v[r][j][0].y, v[r][j][0].z, v[r][j][0].w};
          const uint32_t u[4] = {v[r][j][1].x, v[r][j][1].y, v[r][j][1].z, v[r][j][1].w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            nonfinite[q] = times_zero_plus<T>(l[q], nonfinite[q]);
            nonfinite[q] = times_zero_plus<T>(u[q], nonfinite[q]);
            d[(2 * q) * kCols / 2] = __byte_perm(l[q], u[q], 0x5410);
            d[(2 * q + 1) * kCols / 2] = __byte_perm(l[q], u[q], 0x7632);
          }
        }
      }
    }
  }
  const bool bad = ((nonfinite[0] | nonfinite[1] | nonfinite[2] | nonfinite[3]) & 0x7fff7fffu) != 0;

  const T* bias = static_cast<const T*>(a.bias);
  float bv[2];
#pragma unroll
  for (int ch = 0; ch < 2; ++ch) {
    const int c = c0 + 2 * warp + ch;
    bv[ch] = bias != nullptr && c < a.channels ? static_cast<float>(bias[c]) : 0.f;
  }
  // Output (m, col) of the pair p: word p ^ (m % 8) of its pixel.
  auto out_word = [&](int m, int col, int p) -> uint32_t& { return s_out[(m * TW + col) * 8 + (p ^ (m & 7))]; };

  if (__syncthreads_or(bad)) {
    // The definition's sums over the window's taps, one pixel's pair of channels a step.
    for (int e = tid; e < 16 * a.mt * TW * 8; e += kThreads) {
      const int p = e & 7, col = (e >> 3) % TW, m = (e >> 3) / TW, r0 = run.base(m);
      float sum[2];
      for (int ch = 0; ch < 2; ++ch) {
        const int cl = 2 * p + ch;
        const float bias_c = bias != nullptr && c0 + cl < a.channels ? static_cast<float>(bias[c0 + cl]) : 0.f;
        float acc = 0.f;
        for (int i = 0; i < a.kh; ++i) {
          for (int j = 0; j < a.kw; ++j) {
            const uint16_t x = s_in[(r0 + i) * L::kRow + L::slot(cl) + col + j];
            T xv;
            memcpy(&xv, &x, sizeof(x));
            acc += static_cast<float>(xv) * static_cast<float>(s_w[(cl * a.kh + i) * a.kw + j]);
          }
        }
        sum[ch] = acc + bias_c;
      }
      out_word(m, col, p) = pack2<T>(sum[0], sum[1]);
    }
  } else {
    float acc[2][kTiles][4];
#pragma unroll
    for (int ch = 0; ch < 2; ++ch) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[ch][t][k] = 0.f;
      }
    }
    const int g = lane >> 2, q = lane & 3;
    // ldmatrix: lanes 0-15 give the addresses of the M-tile's rows 0-15.
    uint32_t row[kMT];
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
      row[mi] = mi < a.mt ? sm80::smem_address(s_in) + 2u * uint32_t(run.base(16 * mi + (lane & 15)) * L::kRow) : 0u;
    }
    for (int i = 0; i < a.kh; ++i) {
#pragma unroll
      for (int ch = 0; ch < 2; ++ch) {
        // B (16 x 8): tap(i, k - n) on the band 0 <= k - n < kw; this lane's k = 2q, 2q+1, 2q+8, 2q+9, n = g.
        const int cl = 2 * warp + ch;
        const T* wrow = s_w + (cl * a.kh + i) * a.kw;
        auto tap = [&](int k) -> uint32_t {
          const int j = k - g;
          return j >= 0 && j < a.kw ? bits(wrow[j]) : 0u;
        };
        const uint32_t b0 = tap(2 * q) | tap(2 * q + 1) << 16, b1 = tap(2 * q + 8) | tap(2 * q + 9) << 16;
        const uint32_t plane = 2u * uint32_t(L::slot(cl) + i * L::kRow);
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) {
          if (mi < a.mt) {
            // The row's 8x8 tiles first, then the MMAs (the asm statements
            // keep their order: loads interleaved with the MMAs that wait
            // for them would expose each load's latency).
            uint32_t tile[NT + 1][2];
#pragma unroll
            for (int t = 0; t <= NT; ++t) sm80::ldmatrix_x2(tile[t][0], tile[t][1], row[mi] + plane + 16u * t);
#pragma unroll
            for (int t = 0; t < NT; ++t) {
              const uint32_t frag[4] = {tile[t][0], tile[t][1], tile[t + 1][0], tile[t + 1][1]};
              sm80::mma_16x8x16<T>(acc[ch][mi * NT + t], frag, b0, b1);
            }
          }
        }
      }
    }
    // Lanes store columns 2q and 2q + 1 in the order that puts a store's 32
    // words in 32 banks (columns 0, 2, 5, 7 mod 8 first; rows by the swizzle).
    const int swap = (q >> 1) & 1;
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
      if (mi < a.mt) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const float* d0 = acc[0][mi * NT + t] + 2 * half;
            const float* d1 = acc[1][mi * NT + t] + 2 * half;
            const uint32_t left = pack2<T>(d0[0] + bv[0], d1[0] + bv[1]);
            const uint32_t right = pack2<T>(d0[1] + bv[0], d1[1] + bv[1]);
            const int m = 16 * mi + g + 8 * half, col = 8 * t + 2 * q;
            out_word(m, col + swap, warp) = swap ? right : left;
            out_word(m, col + 1 - swap, warp) = swap ? left : right;
          }
        }
      }
    }
  }
  __syncthreads();

  // The tile to the output, 16 bytes (8 channels of a pixel) a thread.
  T* dst = static_cast<T*>(a.dst);
  const uint4* tile = reinterpret_cast<const uint4*>(s_out);
  for (int e = tid; e < 16 * a.mt * TW * 2; e += kThreads) {
    const int h = e & 1, pix = e >> 1, m = pix / TW, col = pix - m * TW, ox = ox0 + col, c = c0 + 8 * h;
    if (m < run.valid && ox < a.dst_w && c < a.channels) {
      const int f = m & 7;
      uint4 w = tile[pix * 2 + (h ^ (f >> 2))];  // word j of the half is at j ^ (f % 4)
      if (f & 1) w = make_uint4(w.y, w.x, w.w, w.z);
      if (f & 2) w = make_uint4(w.z, w.w, w.x, w.y);
      *reinterpret_cast<uint4*>(dst + ((run.v0 + m) * a.dst_w + ox) * a.channels + c) = w;
    }
  }
}

template <typename T, int NT>
bool launch_nt(const Problem& p, cudaStream_t stream) {
  using L = Layout<NT>;
  constexpr int TW = L::kTW;
  Args a{};
  a.src = p.src, a.weight = p.weight, a.bias = p.bias, a.dst = p.dst;
  a.rows = p.batch * p.dst_h;
  a.channels = int(p.channels), a.src_h = int(p.src_h), a.src_w = int(p.src_w);
  a.dst_h = int(p.dst_h), a.dst_w = int(p.dst_w), a.kh = p.kh, a.kw = p.kw, a.ph = p.ph, a.pw = p.pw;
  a.flipped = p.flipped;
  a.chunks = int((p.channels + kChunk - 1) / kChunk);
  a.w_bytes = (kChunk * p.kh * p.kw * 2 + 15) / 16 * 16;
  // Two blocks a multiprocessor on an H100; GPUs that give a block less than kSmemBudget (99 KB on sm_86 and
  // sm_89) take shorter runs of rows.
  const size_t budget =
      std::min<size_t>(kSmemBudget, at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin);
  size_t smem = 0;
  for (a.mt = kTiles / NT; a.mt >= 1; --a.mt) {
    const int rows = 16 * a.mt;
    const int images = 1 + (rows - 1 + a.dst_h - 1) / a.dst_h;  // most images a run touches
    const int staged = rows + images * (p.kh - 1);
    a.in_bytes = staged * L::kRow * 2;
    smem = size_t(a.w_bytes) + a.in_bytes + size_t(rows) * TW * 32;
    if (smem <= budget) break;
  }
  if (a.mt < 1) return false;
  a.runs = int((a.rows + 16 * a.mt - 1) / (16 * a.mt));
  const int64_t tiles_x = (p.dst_w + TW - 1) / TW, blocks = int64_t(a.chunks) * a.runs * tiles_x;
  if (blocks >= (int64_t(1) << 31)) return false;
  auto kernel = mma_corr_kernel<T, NT>;
  launch::opt_in_shared_memory(kernel);  // above 48 KB a kernel must ask
  kernel<<<unsigned(blocks), kThreads, smem, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <typename T>
bool launch(const Problem& p, cudaStream_t stream) {
  if (p.dst_w <= 8) return launch_nt<T, 1>(p, stream);
  if (p.dst_w <= 16) return launch_nt<T, 2>(p, stream);
  if (p.dst_w <= 32) return launch_nt<T, 4>(p, stream);
  // 49-56 columns (ConvNeXt's and many backbones' 56x56 stage) in one tile of
  // 7 MMA columns: 64 staged columns, two per lane.
  if (p.dst_w <= 56) return launch_nt<T, 7>(p, stream);
  return launch_nt<T, 8>(p, stream);
}

bool fits(int64_t v) {
  return v >= 0 && v <= (int64_t(1) << 28);
}

} // namespace

bool enabled() {
  const char* algo = std::getenv("CUSTOMOPS_DEPTHWISE_ALGO");
  return algo == nullptr || (std::strcmp(algo, "rows") != 0 && std::strcmp(algo, "fma") != 0);
}

bool run(const Problem& p, cudaStream_t stream) {
  if (!enabled() || (p.dtype != at::kHalf && p.dtype != at::kBFloat16)) return false;
  // 3x3 and smaller windows stay with the CUDA-core kernels: their loads, not
  // their FMAs, bound them (MobileNetV2's 3x3 layers: the column kernels
  // 0.9-1.1x cuDNN's time, this kernel 1.4-2.4x).
  if (p.kh * p.kw <= 9 || p.kh > kWindow || p.kw > kWindow || p.sh != 1 || p.sw != 1 || p.dh != 1 ||
      p.dw != 1 || p.m != 1 || p.channels % 8 != 0) {
    return false;
  }
  if (!launch::aligned(p.src, 16) || !launch::aligned(p.dst, 16) || p.batch * p.dst_h * p.dst_w * p.channels == 0) {
    return false;
  }
  if (!fits(p.channels) || !fits(p.src_h) || !fits(p.src_w) || !fits(p.dst_h) || !fits(p.dst_w) ||
      !fits(p.src_w * p.channels) || std::abs(p.ph) > (1 << 20) || std::abs(p.pw) > (1 << 20)) {
    return false;
  }
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  return p.dtype == at::kHalf ? launch<c10::Half>(p, stream) : launch<c10::BFloat16>(p, stream);
}

} // namespace customops::cuda::depthwise_nhwc::mma
