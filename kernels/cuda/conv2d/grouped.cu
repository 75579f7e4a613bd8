// Direct grouped convolution on channels_last memory on the CUDA cores, and the dispatch to the tensor-core
// kernels (see grouped.h for what each takes and why).
//
// Forward and input gradient are one kernel, `direct_conv`: a thread computes kPix output pixels x kOT output
// channels of one group, reading the group's input channels as 8- or 16-byte vectors and the filter from
// shared memory, where each block holds the filters of its output channels for every tap. The input gradient
// is the same gather seen from the other side (kTransposed): input pixel (h, w) takes output pixel
// ((h + pad - r * dil) / stride, ...) where the division is exact. A warp is 8 lanes (output-channel vectors)
// x 4 pixels, so that a filter read of 16 bytes is one shared-memory wavefront broadcast to 4 threads and the
// 8 lanes' input reads of a pixel are one 128-byte row for groups of 8 half channels.
//
// Weight gradient, `weight_grad_direct`: a thread owns kKT x kVec filter values of one tap and walks a chunk of
// pixels, each step two vector loads and kKT * kVec FMAs; chunks write float32 partial sums, summed once.
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/macros/Macros.h>

#include <algorithm>
#include <utility>

#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/conv2d/grouped.h"
#include "kernels/cuda/conv2d/grouped_mma.h"
#include "kernels/cuda/conv2d/partials.h"

namespace customops::cuda::grouped {
namespace {

constexpr int kThreads = 256;           // direct_conv: 8 warps
constexpr int kLanesPerWarp = 8;        // x 4 pixel rows
constexpr int kPix = 4;                 // output pixels per thread: each filter vector read feeds kPix FMAs
constexpr int kFilterBytes = 64 << 10;  // a block's filters in shared memory: three blocks per H100 SM
constexpr int kWeightGradThreads = 512;
constexpr int kBatch = 2;               // weight gradient: pixels whose loads are in flight together
constexpr int64_t kMinChunkPixels = 256;  // shorter weight-gradient chunks write more partial sums than they read

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// One convolution seen from its output: `in` (N, IH, IW, IC) -> `out` (N, OH, OW, OC), groups of ICg -> OCg.
struct Params {
  int64_t N, IC, OC;
  int IH, IW, OH, OW, ICg, OCg, R, S, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int lanes;  // OC / kOT: threads across a pixel's output channels
};

Params forward_params(const Geometry& g, int64_t groups) {
  return {g.N, g.C, g.K, int(g.H), int(g.W), int(g.P), int(g.Q), int(g.C / groups), int(g.K / groups),
          int(g.R), int(g.S), int(g.pad_h), int(g.pad_w), int(g.stride_h), int(g.stride_w), int(g.dil_h),
          int(g.dil_w), 0};
}

// The input gradient as a gather over grad_out: channels K -> C, images P x Q -> H x W.
Params transposed_params(const Geometry& g, int64_t groups) {
  auto p = forward_params(g, groups);
  std::swap(p.IC, p.OC);
  std::swap(p.ICg, p.OCg);
  std::swap(p.IH, p.OH);
  std::swap(p.IW, p.OW);
  return p;
}

// Vectors of at most 16 bytes: the callers guarantee 16-byte aligned rows, or 8 bytes for 8-byte vectors.
template <int N, typename T>
constexpr int kChunk = N * sizeof(T) > 16 ? int(16 / sizeof(T)) : N;

template <int N, typename T>
__device__ __forceinline__ void load_floats(const T* __restrict__ p, float (&out)[N]) {
#pragma unroll
  for (int c = 0; c < N; c += kChunk<N, T>) {
    const auto pack = *reinterpret_cast<const Pack<T, kChunk<N, T>>*>(p + c);
#pragma unroll
    for (int i = 0; i < kChunk<N, T>; ++i) out[c + i] = static_cast<float>(pack.v[i]);
  }
}

template <int N, typename T>
__device__ __forceinline__ void store_floats(T* __restrict__ p, const float (&in)[N]) {
#pragma unroll
  for (int c = 0; c < N; c += kChunk<N, T>) {
    Pack<T, kChunk<N, T>> pack;
#pragma unroll
    for (int i = 0; i < kChunk<N, T>; ++i) pack.v[i] = static_cast<T>(in[c + i]);
    *reinterpret_cast<Pack<T, kChunk<N, T>>*>(p + c) = pack;
  }
}

// wp[tap][ic][o / 4][lane][o % 4] = the filter value joining input channel ic of output channel
// lane * kOT + o's group to that output channel, as float: 16-byte reads of 8 consecutive lanes are one
// shared-memory row. The filter w is (K, C / groups, R, S) with any strides.
template <typename T>
__global__ void pack_filter(const T* __restrict__ w, float* __restrict__ wp, Params p, int ot, bool transposed,
                            int64_t sk, int64_t sc, int64_t sr, int64_t ss) {
  const int64_t total = int64_t(p.R) * p.S * p.ICg * p.OC;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int oo = int(i % 4);
    const int lane = int(i / 4 % p.lanes);
    const int64_t rest = i / 4 / p.lanes;
    const int quad = int(rest % (ot / 4));
    const int ic = int(rest / (ot / 4) % p.ICg);
    const int tap = int(rest / (ot / 4) / p.ICg);
    const int64_t oc = int64_t(lane) * ot + quad * 4 + oo;
    // Forward: output channel k, input channel c of its group. Input gradient: output channel c (of group
    // c / Cg, where OCg = Cg), input channel k = group * Kg + ic.
    const int64_t k = transposed ? oc / p.OCg * p.ICg + ic : oc;
    const int64_t c = transposed ? oc % p.OCg : ic;
    wp[i] = static_cast<float>(w[k * sk + c * sc + (tap / p.S) * sr + (tap % p.S) * ss]);
  }
}

template <typename T, int kVec, int kOT, bool kTransposed>
__global__ void __launch_bounds__(kThreads) direct_conv(const T* __restrict__ in, const float* __restrict__ wp,
                                                       const T* __restrict__ bias, T* __restrict__ out, Params p,
                                                       int block_lanes) {
  extern __shared__ float4 smem[];
  float* ws = reinterpret_cast<float*>(smem);  // [tap][ic][o / 4][block lane][o % 4]
  const int L = block_lanes, rows = kThreads / L;
  const int lane0 = blockIdx.y * L;
  const int64_t per_lane = int64_t(p.R) * p.S * p.ICg * kOT;
  for (int64_t i = threadIdx.x; i < per_lane * L; i += kThreads) {
    const int bl = int(i / 4 % L);
    ws[i] = lane0 + bl < p.lanes ? wp[(i / 4 / L * p.lanes + lane0 + bl) * 4 + i % 4] : 0.f;
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, j = threadIdx.x % 32;
  const int octets = L / kLanesPerWarp;
  const int l = warp % octets * kLanesPerWarp + j % kLanesPerWarp;
  const int row = warp / octets * (32 / kLanesPerWarp) + j / kLanesPerWarp;
  const int lane = lane0 + l;
  if (lane >= p.lanes) return;  // no barrier below
  const int64_t oc0 = int64_t(lane) * kOT;
  const int64_t ic0 = oc0 / p.OCg * p.ICg;
  float b[kOT];
#pragma unroll
  for (int o = 0; o < kOT; ++o) b[o] = bias != nullptr ? static_cast<float>(bias[oc0 + o]) : 0.f;

  const int64_t pixels = p.N * p.OH * p.OW;
  const int64_t tile = int64_t(rows) * kPix;
  for (int64_t t = blockIdx.x; t * tile < pixels; t += gridDim.x) {
    int64_t m[kPix], image[kPix];  // image: n * IH
    int oh[kPix], ow[kPix];
#pragma unroll
    for (int i = 0; i < kPix; ++i) {
      m[i] = t * tile + i * rows + row;
      const int64_t mm = m[i] < pixels ? m[i] : 0;
      ow[i] = int(mm % p.OW);
      oh[i] = int(mm / p.OW % p.OH);
      image[i] = mm / p.OW / p.OH * p.IH;
    }
    float acc[kPix][kOT] = {};
    for (int r = 0; r < p.R; ++r) {
      for (int s = 0; s < p.S; ++s) {
        int64_t src[kPix];
#pragma unroll
        for (int i = 0; i < kPix; ++i) {
          int ih, iw;
          bool ok;
          if constexpr (kTransposed) {
            const int th = oh[i] + p.pad_h - r * p.dil_h, tw = ow[i] + p.pad_w - s * p.dil_w;
            ih = th / p.stride_h;
            iw = tw / p.stride_w;
            ok = th >= 0 && tw >= 0 && th % p.stride_h == 0 && tw % p.stride_w == 0 && ih < p.IH && iw < p.IW;
          } else {
            ih = oh[i] * p.stride_h - p.pad_h + r * p.dil_h;
            iw = ow[i] * p.stride_w - p.pad_w + s * p.dil_w;
            ok = ih >= 0 && ih < p.IH && iw >= 0 && iw < p.IW;
          }
          src[i] = ok && m[i] < pixels ? ((image[i] + ih) * p.IW + iw) * p.IC + ic0 : -1;
        }
        const float4* wt = reinterpret_cast<const float4*>(ws) + (int64_t(r) * p.S + s) * p.ICg * (kOT / 4) * L + l;
        for (int c = 0; c < p.ICg; c += kVec) {
          float x[kPix][kVec];
#pragma unroll
          for (int i = 0; i < kPix; ++i) {
            if (src[i] >= 0) {
              load_floats<kVec>(in + src[i] + c, x[i]);
            } else {
#pragma unroll
              for (int v = 0; v < kVec; ++v) x[i][v] = 0.f;
            }
          }
#pragma unroll
          for (int v = 0; v < kVec; ++v) {
#pragma unroll
            for (int q = 0; q < kOT / 4; ++q) {
              const float4 w = wt[((c + v) * (kOT / 4) + q) * L];
#pragma unroll
              for (int i = 0; i < kPix; ++i) {
                acc[i][q * 4 + 0] = fmaf(x[i][v], w.x, acc[i][q * 4 + 0]);
                acc[i][q * 4 + 1] = fmaf(x[i][v], w.y, acc[i][q * 4 + 1]);
                acc[i][q * 4 + 2] = fmaf(x[i][v], w.z, acc[i][q * 4 + 2]);
                acc[i][q * 4 + 3] = fmaf(x[i][v], w.w, acc[i][q * 4 + 3]);
              }
            }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kPix; ++i) {
      if (m[i] >= pixels) continue;
#pragma unroll
      for (int o = 0; o < kOT; ++o) acc[i][o] += b[o];
      store_floats<kOT>(out + m[i] * p.OC + oc0, acc[i]);
    }
  }
}

// partial[chunk][k][c][r][s] = sum over the chunk's output pixels of grad_out[pixel][k] * x[tap's pixel][c], in
// forward Params (in = x, out = grad_out). Thread: one tap, kKT output channels x kVec input channels; kKT * size
// and kVec * size at most 16 bytes (one load each).
template <typename T, int kVec, int kKT>
__global__ void __launch_bounds__(kWeightGradThreads) weight_grad_direct(const T* __restrict__ gout,
                                                                        const T* __restrict__ x,
                                                                        float* __restrict__ partial, Params p,
                                                                        int64_t chunk) {
  const int k_lanes = int(p.OC / kKT);
  const int lanes = k_lanes * (p.ICg / kVec);
  const int slot = blockIdx.y * blockDim.x + threadIdx.x;
  if (slot >= lanes * p.R * p.S) return;
  const int lane = slot % lanes, tap = slot / lanes;
  const int r = tap / p.S, s = tap % p.S;
  const int64_t k0 = int64_t(lane % k_lanes) * kKT;
  const int c0 = lane / k_lanes * kVec;  // within the group
  const int64_t xc = k0 / p.OCg * p.ICg + c0;
  const int64_t pixels = p.N * p.OH * p.OW;
  const int64_t m0 = blockIdx.x * chunk, m1 = std::min(pixels, m0 + chunk);
  int ow = int(m0 % p.OW), oh = int(m0 / p.OW % p.OH);
  int64_t image = m0 / p.OW / p.OH * p.IH;
  float acc[kKT][kVec] = {};
  // kBatch pixels a step: their loads are in flight together before the FMAs wait (H100, float32 ResNeXt
  // 32 x 256 x 56 x 56: 0.62 ms one pixel a step, 0.48 two; eight, with 8-byte input vectors and 256-thread
  // blocks, 0.62).
  for (int64_t m = m0; m < m1; m += kBatch) {
    Pack<T, kKT> dy[kBatch];
    Pack<T, kVec> xv[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int ih = oh * p.stride_h - p.pad_h + r * p.dil_h, iw = ow * p.stride_w - p.pad_w + s * p.dil_w;
      if (m + b < m1 && ih >= 0 && ih < p.IH && iw >= 0 && iw < p.IW) {
        dy[b] = *reinterpret_cast<const Pack<T, kKT>*>(gout + (m + b) * p.OC + k0);
        xv[b] = *reinterpret_cast<const Pack<T, kVec>*>(x + ((image + ih) * p.IW + iw) * p.IC + xc);
      } else {
#pragma unroll
        for (int o = 0; o < kKT; ++o) dy[b].v[o] = T(0);
#pragma unroll
        for (int v = 0; v < kVec; ++v) xv[b].v[v] = T(0);
      }
      if (++ow == p.OW) {
        ow = 0;
        if (++oh == p.OH) {
          oh = 0;
          image += p.IH;
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int o = 0; o < kKT; ++o) {
        const float d = static_cast<float>(dy[b].v[o]);
#pragma unroll
        for (int v = 0; v < kVec; ++v) acc[o][v] = fmaf(d, static_cast<float>(xv[b].v[v]), acc[o][v]);
      }
    }
  }
  float* dst = partial + blockIdx.x * p.OC * p.ICg * p.R * p.S;
#pragma unroll
  for (int o = 0; o < kKT; ++o) {
#pragma unroll
    for (int v = 0; v < kVec; ++v) dst[((k0 + o) * p.ICg + c0 + v) * p.R * p.S + tap] = acc[o][v];
  }
}

// Calls f(T{}) for the dtypes the kernels are built for (supports() admits no other).
template <typename F>
void dispatch_dtype(at::ScalarType dtype, F&& f) {
  switch (dtype) {
    case at::kHalf: return f(at::Half{});
    case at::kBFloat16: return f(at::BFloat16{});
    case at::kFloat: return f(float{});
    default: TORCH_INTERNAL_ASSERT(false, "customops::conv2d: grouped kernel for ", dtype);
  }
}

// 16-byte vectors where the group's channels allow, else 8-byte ones (supports() checked one of them).
template <typename T>
bool wide(int64_t channels) {
  return channels * int64_t(sizeof(T)) % 16 == 0;
}

int output_vector(int64_t out_group_channels) {
  return out_group_channels % 8 == 0 ? 8 : 4;
}

int64_t filter_bytes_per_lane(const Params& p, int ot) {
  return int64_t(p.R) * p.S * p.ICg * ot * int64_t(sizeof(float));
}

template <typename T, int kVec, int kOT, bool kTransposed>
void launch_conv(const at::Tensor& in, const at::Tensor& wp, const at::Tensor& bias, const at::Tensor& out,
                 const Params& p) {
  const auto kernel = direct_conv<T, kVec, kOT, kTransposed>;
  launch::opt_in_shared_memory(kernel);
  // The widest block (8..64 lanes) whose filters fit kFilterBytes; 8 lanes take what supports() admitted.
  const int64_t per_lane = filter_bytes_per_lane(p, kOT);
  int L = 64;
  while (L > kLanesPerWarp && (L / 2 >= p.lanes || L * per_lane > kFilterBytes)) L /= 2;
  const int64_t smem = L * per_lane;
  const int64_t lane_blocks = (p.lanes + L - 1) / L;
  const int64_t tiles = (p.N * p.OH * p.OW + (kThreads / L) * kPix - 1) / ((kThreads / L) * kPix);
  // One wave of resident blocks, each looping over tiles: its filters are loaded once.
  const int64_t blocks = std::max<int64_t>(1, launch::resident_blocks(kernel, kThreads, smem) / lane_blocks);
  const dim3 grid(static_cast<unsigned>(std::min(tiles, blocks)), static_cast<unsigned>(lane_blocks));
  kernel<<<grid, kThreads, smem, at::cuda::getCurrentCUDAStream()>>>(
      in.const_data_ptr<T>(), wp.const_data_ptr<float>(), bias.defined() ? bias.const_data_ptr<T>() : nullptr,
      out.mutable_data_ptr<T>(), p, L);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <bool kTransposed>
void run_conv(const at::Tensor& in, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& out, Params p) {
  const int ot = output_vector(p.OCg);
  p.lanes = int(p.OC / ot);
  auto wp = at::empty({int64_t(p.R) * p.S * p.ICg * p.OC}, in.options().dtype(at::kFloat));
  const auto stream = at::cuda::getCurrentCUDAStream();
  dispatch_dtype(in.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const int64_t total = wp.numel();
    const unsigned grid = unsigned(std::min<int64_t>((total + 255) / 256, 4096));
    pack_filter<T><<<grid, 256, 0, stream>>>(w.const_data_ptr<T>(), wp.mutable_data_ptr<float>(), p, ot,
                                             kTransposed, w.stride(0), w.stride(1), w.stride(2), w.stride(3));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    constexpr int kWide = 16 / sizeof(T), kNarrow = 8 / sizeof(T);
    const bool v16 = wide<T>(p.ICg);
    if (ot == 8) {
      v16 ? launch_conv<T, kWide, 8, kTransposed>(in, wp, bias, out, p)
          : launch_conv<T, kNarrow, 8, kTransposed>(in, wp, bias, out, p);
    } else {
      v16 ? launch_conv<T, kWide, 4, kTransposed>(in, wp, bias, out, p)
          : launch_conv<T, kNarrow, 4, kTransposed>(in, wp, bias, out, p);
    }
  });
}

template <typename T, int kVec, int kKT>
void launch_weight_grad(const at::Tensor& gout, const at::Tensor& x, const Params& p, at::Tensor* partial) {
  const auto kernel = weight_grad_direct<T, kVec, kKT>;
  const int64_t slots = (p.OC / kKT) * (p.ICg / kVec) * p.R * p.S;
  const int64_t slot_blocks = (slots + kWeightGradThreads - 1) / kWeightGradThreads;
  const int threads = int(((slots + slot_blocks - 1) / slot_blocks + 31) / 32 * 32);  // even blocks
  const int64_t pixels = p.N * p.OH * p.OW;
  const int64_t wanted = std::max<int64_t>(1, launch::resident_blocks(kernel, threads, 0) / slot_blocks);
  const int64_t chunks0 = std::clamp<int64_t>(pixels / kMinChunkPixels, 1, wanted);
  const int64_t chunk = (pixels + chunks0 - 1) / chunks0;
  const int64_t chunks = (pixels + chunk - 1) / chunk;
  *partial = at::empty({chunks, p.OC, p.ICg, p.R, p.S}, x.options().dtype(at::kFloat));
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(slot_blocks));
  kernel<<<grid, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      gout.const_data_ptr<T>(), x.const_data_ptr<T>(), partial->mutable_data_ptr<float>(), p, chunk);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

const char* describe(Refusal r) {
  switch (r) {
    case Refusal::kNone: return "direct grouped kernel";
    case Refusal::kDtype: return "explicit GEMM: float64 (the direct grouped kernels take float16, bfloat16, float32)";
    case Refusal::kAlignment:
      return "explicit GEMM: channels per group not a multiple of 4, or pointers not 16-byte aligned";
    case Refusal::kSize:
      return "explicit GEMM: more than 32 channels per group, filters beyond shared memory, or an empty batch";
    case Refusal::kForced: return "explicit GEMM: CUSTOMOPS_CONV2D_ALGO=explicit";
    default: return implicit_gemm::describe(r);
  }
}

Refusal supports(at::ScalarType dtype, const Geometry& g, int64_t groups) {
  if (groups == 1) return Refusal::kGroups;
  if (dtype != at::kHalf && dtype != at::kBFloat16 && dtype != at::kFloat) return Refusal::kDtype;
  const int64_t cg = g.C / groups, kg = g.K / groups;
  // 8-byte vectors: 4 half or 2 float channels; the output vectors are 4 or 8 channels of any dtype.
  if (cg % 4 != 0 || kg % 4 != 0) return Refusal::kAlignment;
  if (cg > kMaxGroupChannels || kg > kMaxGroupChannels || g.N == 0) return Refusal::kSize;
  // The filters of 8 lanes must fit one block's shared memory, in both directions.
  const int64_t optin = int64_t(at::cuda::getCurrentDeviceProperties()->sharedMemPerBlockOptin);
  const int64_t taps_bytes = g.R * g.S * int64_t(sizeof(float)) * kLanesPerWarp;
  if (taps_bytes * cg * output_vector(kg) > optin || taps_bytes * kg * output_vector(cg) > optin) {
    return Refusal::kSize;
  }
  // Image coordinates and thread slots are 32-bit. Padding, stride and dilation are int (Params, mma::Conv), and
  // bounded first so that `reach` cannot overflow int64 (a stride of 2^63 - 1 wrapped it negative).
  constexpr int64_t kIntMax = (int64_t{1} << 31) - 1;
  if (!implicit_gemm::window_fits_int32(g)) return Refusal::kSize;
  const int64_t reach = std::max({g.H, g.W, g.P * g.stride_h, g.Q * g.stride_w}) + std::max(g.pad_h, g.pad_w) +
                        std::max(g.dil_h * g.R, g.dil_w * g.S);
  if (reach > kIntMax || g.K * cg * g.R * g.S > kIntMax) return Refusal::kSize;
  return Refusal::kNone;
}

void forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& y,
             const Geometry& g, int64_t groups) {
  const Params p = forward_params(g, groups);
  const mma::Conv c{p.N, p.IH, p.IW, int(p.IC), p.OH, p.OW, int(p.OC), p.ICg, p.OCg, p.R, p.S, p.pad_h, p.pad_w,
                    p.stride_h, p.stride_w, p.dil_h, p.dil_w, int(groups), false};
  if (mma::takes(c, x.scalar_type(), at::globalContext().allowTF32CuBLAS())) return mma::run(x, w, bias, y, c);
  run_conv<false>(x, w, bias, y, p);
}

void input_grad(const at::Tensor& grad_out, const at::Tensor& w, const at::Tensor& grad_input, const Geometry& g,
                int64_t groups) {
  // At unit stride, the forward of grad_out with the flipped filter, padded by dilation * (kernel - 1) - padding.
  const Params p = transposed_params(g, groups);
  const int pad_h = p.dil_h * (p.R - 1) - p.pad_h, pad_w = p.dil_w * (p.S - 1) - p.pad_w;
  const mma::Conv c{p.N, p.IH, p.IW, int(p.IC), p.OH, p.OW, int(p.OC), p.ICg, p.OCg, p.R, p.S, pad_h, pad_w,
                    1, 1, p.dil_h, p.dil_w, int(groups), true};
  if (p.stride_h == 1 && p.stride_w == 1 && pad_h >= 0 && pad_w >= 0 &&
      mma::takes(c, grad_out.scalar_type(), at::globalContext().allowTF32CuBLAS())) {
    return mma::run(grad_out, w, at::Tensor(), grad_input, c);
  }
  run_conv<true>(grad_out, w, at::Tensor(), grad_input, p);
}

at::Tensor weight_grad(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const Geometry& g,
                       int64_t groups) {
  const Params p = forward_params(g, groups);
  at::Tensor partial;
  const mma::Conv c{p.N, p.IH, p.IW, int(p.IC), p.OH, p.OW, int(p.OC), p.ICg, p.OCg, p.R, p.S, p.pad_h, p.pad_w,
                    p.stride_h, p.stride_w, p.dil_h, p.dil_w, int(groups), false};
  if (mma::takes_weight_grad(c, x.scalar_type())) {
    partial = mma::weight_grad_partials(x, grad_out, c);
  } else {
    dispatch_dtype(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWide = 16 / sizeof(T), kNarrow = 8 / sizeof(T);
    const bool v16 = wide<T>(p.ICg);
    if (wide<T>(p.OCg)) {
      v16 ? launch_weight_grad<T, kWide, kWide>(grad_out, x, p, &partial)
          : launch_weight_grad<T, kNarrow, kWide>(grad_out, x, p, &partial);
    } else {
      v16 ? launch_weight_grad<T, kWide, kNarrow>(grad_out, x, p, &partial)
          : launch_weight_grad<T, kNarrow, kNarrow>(grad_out, x, p, &partial);
    }
  });
  }
  return sum_weight_partials(partial, weight);
}

} // namespace customops::cuda::grouped
