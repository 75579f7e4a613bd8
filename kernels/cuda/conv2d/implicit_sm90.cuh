// Implicit-GEMM conv2d kernels for Hopper (sm_90a), from CUTLASS 3.x's convolution collectives: TMA im2col
// loads of the activations, warp-specialized WGMMA mainloop, float32 accumulation, bias in the epilogue. This
// header holds the kernel template and its launcher; implicit_{fprop,dgrad,wgrad}_sm90.cu pick the tiles
// per pass (one file each, so that the build compiles them in parallel), built for sm_90a only
// (cmake/CustomopsCutlass.cmake); conv2d.cu decides when to call them.
//
// GEMM view (channels_last tensors):
//   forward:     M = N*P*Q, N = K, K = R*S*C      A = x (NHWC, im2col), B = w (KRSC), D = y (NPQK)
//   input grad:  M = N*H*W, N = C, K = R*S*K      A = grad_out (NPQK, im2col), B = w, D = grad_input (NHWC)
//   weight grad: M = K, N = R*S*C, K = N*P*Q      A = grad_out (NPQK), B = x (NHWC, im2col), D = partial (KRSC)
//
// Non-persistent kernels with one consumer warpgroup (CUTLASS 4.2 has no persistent SM90 convolution), so a tile
// of 128 x 128 float32 accumulators fills a warpgroup's registers and one CTA holds an SM; clusters of two
// CTAs along N share each A tile through TMA multicast.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAMacros.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/numeric_types.h"
// CUTLASS 4.2's sm100 conv collective names cutlass::KernelHardwareInfo without including it.
#include "cutlass/kernel_hardware_info.hpp"
#include "cute/tensor.hpp"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/device/conv_universal_adapter.hpp"
#include "cutlass/conv/dispatch_policy.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"

#include "kernels/cuda/conv2d/implicit.h"

namespace customops::cuda::implicit_gemm::sm90 {

using cutlass::conv::Operator;

// One kernel: operator, input element type, CTA tile (M, N, K-slice), pipeline stages (0: as many as fit
// beside the epilogue), cluster shape. The forward and input gradient write
// their element type through the TMA epilogue, bias added per output channel (a null bias pointer reads as
// zeros); the weight gradient writes float32 partial sums (the caller adds the batch chunks and rounds once).
template <Operator Op, class Element, class Tile, int Stages = 0,
          class ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>>
struct Kernel {
  static constexpr bool kWgrad = Op == Operator::kWgrad;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;  // TMA moves 16-byte rows
  using Out = cute::conditional_t<kWgrad, float, Element>;
  static constexpr int kAlignOut = 128 / cutlass::sizeof_bits<Out>::value;
  using Cluster = ClusterShape;
  // The weight gradient's (K, (C, S, R)) with C fastest is KRSC memory.
  using LayoutOut = cute::conditional_t<kWgrad, cutlass::layout::TensorKCSR, cutlass::layout::TensorNHWC>;
  using Fusion = cute::conditional_t<kWgrad, cutlass::epilogue::fusion::LinearCombination<Out, float, void, float>,
                                     cutlass::epilogue::fusion::LinCombPerColBias<Out, float, Out, void, float>>;
  using Schedule = cute::conditional_t<kWgrad, cutlass::epilogue::NoSmemWarpSpecialized,
                                       cutlass::epilogue::TmaWarpSpecialized>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutOut, kAlignOut, Out, LayoutOut,
      kAlignOut, Schedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Op, Element, cutlass::layout::TensorNHWC, kAlign,
      Element, cutlass::layout::TensorNHWC, kAlign, float, Tile, Cluster,
      cute::conditional_t<Stages == 0,
                          cutlass::conv::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
                          cutlass::conv::collective::StageCount<(Stages > 0 ? Stages : 1)>>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;
  using Problem = cutlass::conv::ConvProblemShape<Op, 2>;
  using ConvKernel = cutlass::conv::kernel::ConvUniversal<Problem, Mainloop, Epilogue>;
  using Device = cutlass::conv::device::ConvUniversalAdapter<ConvKernel>;
  using StrideD = typename ConvKernel::StrideD;
  using ElementT = Element;
  static constexpr Operator kOp = Op;
};

template <Operator Op>
typename cutlass::conv::ConvProblemShape<Op, 2> problem(const Geometry& g) {
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  return {cutlass::conv::Mode::kCrossCorrelation,
          {i(g.N), i(g.H), i(g.W), i(g.C)},
          {i(g.K), i(g.R), i(g.S), i(g.C)},
          {i(g.pad_h), i(g.pad_w)},
          {i(g.pad_h), i(g.pad_w)},
          {i(g.stride_h), i(g.stride_w)},
          {i(g.dil_h), i(g.dil_w)},
          1};
}

// The epilogue's output strides ((W|Q, H|P, N), channel, batch) from the problem's packed output tensor.
// The weight gradient's: (K, (C, S, R), batch) of the packed KRSC filter.
template <class K>
typename K::StrideD output_stride(const typename K::Problem& ps) {
  typename K::StrideD d{};
  if constexpr (K::kWgrad) {
    cute::get<0>(d) = ps.stride_C[0];
    cute::get<1, 1>(d) = ps.stride_C[2];
    cute::get<1, 2>(d) = ps.stride_C[1];
  } else {
    constexpr int rank = K::Problem::RankT;
    cute::for_each(cute::make_seq<cute::rank<0>(typename K::StrideD{})>{},
                   [&](auto j) { cute::get<0, j>(d) = ps.stride_C[rank - 2 - j]; });
  }
  return d;
}

inline cutlass::KernelHardwareInfo hardware(const at::Tensor& t) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = t.get_device();
  hw.sm_count = at::cuda::getDeviceProperties(hw.device_id)->multiProcessorCount;
  return hw;
}

// CUTLASS's adapter sets the kernel's shared-memory limit before every launch; it is a driver call that costs
// as much host time as the launch, so it happens once per kernel and device here.
template <class K>
void allow_shared_memory(int device) {
  constexpr int bytes = K::ConvKernel::SharedStorageSize;
  if constexpr (bytes >= (48 << 10)) {
    static std::array<std::atomic<bool>, C10_COMPILE_TIME_MAX_GPUS> done{};
    if (done.at(device).load(std::memory_order_acquire)) return;
    C10_CUDA_CHECK(cudaFuncSetAttribute(cutlass::device_kernel<typename K::ConvKernel>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    done.at(device).store(true, std::memory_order_release);  // a racing thread sets it twice, harmlessly
  }
}

// a, b: the GEMM's operands (forward: x, w; input grad: grad_out, w); d: its output; bias may be null.
// `like`: a tensor on the device, for the workspace's options.
template <class K>
Refusal run(const Geometry& g, const void* a, const void* b, const void* bias, void* d, const at::Tensor& like) {
  using T = typename K::ElementT;
  using Out = typename K::Out;
  const auto ps = problem<K::kOp>(g);
  const auto stride = output_stride<K>(ps);
  typename K::Device::Arguments args(ps, {static_cast<const T*>(a), static_cast<const T*>(b)},
                                     {{}, nullptr, stride, static_cast<Out*>(d), stride}, hardware(like));
  args.epilogue.thread.alpha = 1.0f;
  if constexpr (!K::kWgrad) args.epilogue.thread.bias_ptr = static_cast<const Out*>(bias);
  if (K::Device::can_implement(args) != cutlass::Status::kSuccess) return Refusal::kCutlass;
  const size_t bytes = K::Device::get_workspace_size(args);
  at::Tensor workspace;
  if (bytes) workspace = at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
  void* ws = bytes ? workspace.data_ptr() : nullptr;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  cutlass::Status status = K::ConvKernel::initialize_workspace(args, ws, stream);
  if (status == cutlass::Status::kSuccess) {
    allow_shared_memory<K>(like.get_device());
    auto params = K::ConvKernel::to_underlying_arguments(args, ws);
    status = K::Device::run(params, stream);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  TORCH_CHECK(status == cutlass::Status::kSuccess, "customops::conv2d: the implicit-GEMM kernel failed to launch (",
              cutlass::cutlassGetStatusString(status), ")");
  return Refusal::kNone;
}

// The forward's and the input gradient's tiles: 128 output pixels x 64 or 128 channels of the GEMM's N (the
// forward's output channels, the input gradient's input channels); half types slice the reduction 64 deep,
// float32 (TF32, 4-byte elements) 32 deep, for the same shared-memory stage size.
using TileN64 = cute::Shape<cute::_128, cute::_64, cute::Shape<cute::_64>>;
using TileN128 = cute::Shape<cute::_128, cute::_128, cute::Shape<cute::_64>>;
using TileTf32N64 = cute::Shape<cute::_128, cute::_64, cute::Shape<cute::_32>>;
using TileTf32N128 = cute::Shape<cute::_128, cute::_128, cute::Shape<cute::_32>>;
using PairN = cute::Shape<cute::_1, cute::_2, cute::_1>;  // two CTAs along N share the activation tile

enum class Choice { kN64, kN128, kN128Pair };

// Measured on an H100 (queued, float16, TF32 alike; prof tile runs over 19 3x3 shapes, ResNet-50's at batch
// 16-256 among them): up to 64 channels of N the narrow tile with four stages, so that two CTAs share an SM
// (with the automatic count one CTA fills the shared memory and the GPU stalls between tiles: 64 -> 64 channels
// at 56x56, 1.50x cuDNN's time against 1.20x); past 64 the wide tile, in pairs where the channel tiles pair up
// (256 -> 256 channels at 56x56: 1.28x -> 1.14x cuDNN's in float16, 2.19x -> 1.04x in TF32 against the narrow
// tile used before; an odd tile count leaves half a pair idle: 384 channels 1.26x alone, 1.77x in pairs). The
// input gradient follows the same rule (float16: 256 channels at 56x56, 1.31x -> 1.16x cuDNN's time in pairs;
// 128 channels 1.04x alone, 2.20x in pairs).
inline Choice choose(int64_t n_channels) {
  if (n_channels <= 64) return Choice::kN64;
  return (n_channels + 127) / 128 % 2 == 0 ? Choice::kN128Pair : Choice::kN128;
}

// go(kernel) with the kernel of choice c: the narrow tile with NarrowStages stages (0: as many as fit), the wide
// tile, or the wide tile in pairs.
template <Operator Op, class Element, class Tile, class TileWide, int NarrowStages, class Go>
Refusal run_choice(Choice c, const Go& go) {
  switch (c) {
    case Choice::kN64: return go(Kernel<Op, Element, Tile, NarrowStages>{});
    case Choice::kN128: return go(Kernel<Op, Element, TileWide>{});
    case Choice::kN128Pair: return go(Kernel<Op, Element, TileWide, 0, PairN>{});
  }
  return Refusal::kCutlass;
}

} // namespace customops::cuda::implicit_gemm::sm90
