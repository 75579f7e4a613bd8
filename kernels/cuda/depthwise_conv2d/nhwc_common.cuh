// depthwise_conv2d on CUDA, channels_last: what the row-streaming and tiled
// kernels of nhwc.cu (forward, input gradient) and nhwc_wgrad.cu (weight
// gradient) share: the block and tile constants, the geometry, the staging of
// NHWC pixels into shared memory (cp.async), a thread's lanes in registers,
// and the launch configurations' set-up and cache. nhwc.cu's first comment
// describes the kernels.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cuda/common/launch.cuh"

namespace customops::cuda::depthwise_nhwc {

constexpr int kS = 7;            // outputs per thread along a row
constexpr int kThreads = 256;    // block size, at most
constexpr int kChunkBytes = 32;  // bytes of a pixel's channels a block owns
constexpr size_t kTwoBufferBudget = 112 * 1024;  // shared memory of a double-buffered block

template <typename scalar_t>
constexpr int chunk_lanes() {
  return kChunkBytes / static_cast<int>(sizeof(scalar_t));
}

template <typename scalar_t>
constexpr int thread_lanes() {
  return sizeof(scalar_t) == 8 ? 2 : 4;
}

inline unsigned grid_for(int64_t blocks) {
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t(1) << 30));
}

__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// dst[n, y, x, o] = sum over taps of src[n, y*sh - ph + i*dh, x*sw - pw + j*dw, o / m] * tap(o, i, j).
struct Geometry {
  int64_t batch, src_c, dst_c, src_h, src_w, dst_h, dst_w;
  int kh, kw, sh, sw, dh, dw, ph, pw;  // ph, pw are negative for some input gradients
  int m;
  bool flipped;  // input gradient (m == 1): taps flipped
};

inline Geometry forward_geometry(const conv::DepthwisePlan& p) {
  const auto& s = p.s;
  const auto& w = p.w;
  return {s.N, s.C, s.O, s.H, s.W, s.out_h, s.out_w, int(w.kh), int(w.kw), int(w.sh), int(w.sw), int(w.dh),
          int(w.dw), int(w.ph), int(w.pw), int(p.m), false};
}

// ---------------------------------------------------------------------------
// Staging: a tile of rows x cols pixels, the chunk's lanes of each, into
// shared memory (pixel-major, chunk_lanes() per pixel).

__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// One word from global to shared memory, zeros where !ok (src is then any
// valid address: cp.async reads no byte of a zero-length source).
template <typename Word>
__device__ __forceinline__ void copy_word(Word* dst, const void* src, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(Word) >= 4) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    const int bytes = ok ? int(sizeof(Word)) : 0;
    if constexpr (sizeof(Word) == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes) : "memory");
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(int(sizeof(Word))),
                   "r"(bytes)
                   : "memory");
    }
    return;
  }
#endif
  *dst = ok ? *static_cast<const Word*>(src) : Word{};
}

// Contiguous lanes: the chunk's channels c0.. of img (channels per pixel),
// copied a word at a time. Each thread keeps one word of the pixel and steps
// over pixels without divisions.
template <typename scalar_t, typename Word>
__device__ __forceinline__ void stage_words(scalar_t* __restrict__ dst, const scalar_t* __restrict__ img, int64_t h,
                                            int64_t w, int64_t channels, int64_t c0, int64_t y0, int64_t x0,
                                            int rows, int cols) {
  constexpr int kLanes = chunk_lanes<scalar_t>();
  constexpr int kPer = sizeof(Word) / sizeof(scalar_t);
  constexpr int kWords = kLanes / kPer;
  const int tid = threadIdx.x, step = blockDim.x / kWords, pixels = rows * cols;
  const int u = tid % kWords;
  const int64_t ch = c0 + u * kPer;
  const bool lane_ok = ch < channels;  // channels is a multiple of kPer: whole words
  const int step_r = step / cols, step_q = step % cols;
  int p = tid / kWords, r = p / cols, q = p % cols;
  for (; p < pixels; p += step) {
    const int64_t y = y0 + r, x = x0 + q;
    const bool ok = lane_ok && y >= 0 && y < h && x >= 0 && x < w;
    copy_word(reinterpret_cast<Word*>(dst + p * kLanes + u * kPer), ok ? img + (y * w + x) * channels + ch : img, ok);
    q += step_q;
    r += step_r;
    if (q >= cols) {
      q -= cols;
      ++r;
    }
  }
}

// Lane by lane: lane l of the chunk holds channel (c0 + l) / m of img, for
// c0 + l < lanes_end (the channel multiplier's gather, and unaligned rows).
template <typename scalar_t>
__device__ __forceinline__ void stage_lanes(scalar_t* __restrict__ dst, const scalar_t* __restrict__ img, int64_t h,
                                            int64_t w, int64_t channels, int64_t c0, int64_t lanes_end, int m,
                                            int64_t y0, int64_t x0, int rows, int cols) {
  constexpr int kLanes = chunk_lanes<scalar_t>();
  const int tid = threadIdx.x, step = blockDim.x / kLanes, pixels = rows * cols;
  const int lane = tid % kLanes;
  const int64_t ch = (c0 + lane) / m;
  const bool lane_ok = c0 + lane < lanes_end;
  const int step_r = step / cols, step_q = step % cols;
  int p = tid / kLanes, r = p / cols, q = p % cols;
  for (; p < pixels; p += step) {
    const int64_t y = y0 + r, x = x0 + q;
    const bool ok = lane_ok && y >= 0 && y < h && x >= 0 && x < w;
    dst[p * kLanes + lane] = ok ? img[(y * w + x) * channels + ch] : scalar_t(0);
    q += step_q;
    r += step_r;
    if (q >= cols) {
      q -= cols;
      ++r;
    }
  }
}

// What a staging copies: the image (one batch element), its channels, and the
// chunk's first channel; word is the copy's width in bytes (0: lane by lane,
// reading channel lane / m). Blocks have a multiple of 32 threads, so every
// thread keeps one word (or lane) of the pixel.
template <typename scalar_t>
struct Source {
  const scalar_t* img;
  int64_t h, w, channels;
  int word, m;
};

template <typename scalar_t>
__device__ __forceinline__ void stage(scalar_t* dst, const Source<scalar_t>& s, int64_t c0, int64_t lanes_end,
                                      int64_t y0, int64_t x0, int rows, int cols) {
  switch (s.word) {
    case 16:
      stage_words<scalar_t, uint4>(dst, s.img, s.h, s.w, s.channels, c0, y0, x0, rows, cols);
      break;
    case 8:
      stage_words<scalar_t, uint2>(dst, s.img, s.h, s.w, s.channels, c0, y0, x0, rows, cols);
      break;
    case 4:
      if constexpr (sizeof(scalar_t) <= 4) {
        stage_words<scalar_t, uint32_t>(dst, s.img, s.h, s.w, s.channels, c0, y0, x0, rows, cols);
      }
      break;
    default:
      stage_lanes(dst, s.img, s.h, s.w, s.channels, c0, lanes_end, s.m, y0, x0, rows, cols);
  }
}

// The widest word (16, 8 or 4 bytes) that whole pixels' channel rows and the
// base address allow; 0 (lane by lane) for the channel multiplier's gather.
inline int staging_word(const void* base, int64_t channels, int64_t element, int m) {
  if (m != 1) return 0;
  for (int word : {16, 8, 4}) {
    if (word >= element && (channels * element) % word == 0 && launch::aligned(base, word)) return word;
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Lanes in registers.

template <typename T, int V>
__device__ __forceinline__ void load_lanes(const T* p, at::opmath_type<T> (&v)[V]) {
  const auto pack = *reinterpret_cast<const launch::Pack<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) v[k] = static_cast<at::opmath_type<T>>(pack.v[k]);
}

// The thread's first `live` lanes at out (all V as one word when vec).
template <typename scalar_t, int V, typename opmath_t>
__device__ __forceinline__ void store_lanes(scalar_t* out, const opmath_t (&acc)[V], const opmath_t (&bias)[V],
                                            int live, bool vec) {
  if (vec) {
    launch::Pack<scalar_t, V> p;
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = static_cast<scalar_t>(acc[k] + bias[k]);
    *reinterpret_cast<launch::Pack<scalar_t, V>*>(out) = p;
    return;
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if (k < live) out[k] = static_cast<scalar_t>(acc[k] + bias[k]);
  }
}

// Lets a kernel take all of a multiprocessor's shared memory (left to itself
// the driver picked a 100 KB carve-out that held one 89 KB block) and returns
// its registers a thread.
template <typename Kernel>
int prepare(Kernel* kernel) {
  const auto* props = at::cuda::getCurrentDeviceProperties();
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(props->sharedMemPerBlockOptin)));
  C10_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  cudaFuncAttributes attributes{};
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return attributes.numRegs;
}

// Launch configurations, computed once per device, geometry and staging
// word: choosing one queries the device and scores hundreds of shapes (tens
// of microseconds on the host, as long as a small forward on the GPU).
template <typename Value>
class Memo {
 public:
  template <typename Make>
  Value get(const std::vector<int64_t>& key, Make&& make) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    Value value = make();
    const std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() >= 4096) map_.clear();  // dynamic shapes: bounded
    map_.emplace(key, value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<std::vector<int64_t>, Value> map_;
};

inline std::vector<int64_t> key_of(const Geometry& g, int64_t word, int64_t word2 = 0) {
  return {at::cuda::current_device(), g.batch, g.src_c, g.dst_c, g.src_h, g.src_w, g.dst_h, g.dst_w, g.kh, g.kw,
          g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.m, g.flipped, word, word2};
}

template <typename scalar_t>
Source<scalar_t> source(const at::Tensor& t, int m) {
  const scalar_t* p = t.const_data_ptr<scalar_t>();
  const int64_t element = int64_t(sizeof(scalar_t));
  return {p, t.size(2), t.size(3), t.size(1), staging_word(p, t.size(1), element, m), m};
}

} // namespace customops::cuda::depthwise_nhwc
