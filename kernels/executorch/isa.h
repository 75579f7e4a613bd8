// customops' ExecuTorch kernels whose loops use at::vec (header-only) are compiled once per instruction set, as
// libtorch's CPU kernels are: the files of kernels/executorch/isa/, each build in namespace
// customops::executorch_kernels::<CPU_CAPABILITY> (cmake/CustomopsExecutorch.cmake). The kernels of
// kernels/executorch/ call the build this processor runs.
#pragma once

#include "kernels/core/fold.h"
#include "kernels/core/pointwise.h"
#include "kernels/executorch/common.h"

namespace customops::executorch_kernels {

#define CUSTOMOPS_ET_DECLARE(...) \
  namespace DEFAULT {             \
  __VA_ARGS__                     \
  }                               \
  namespace AVX2 {                \
  __VA_ARGS__                     \
  }

CUSTOMOPS_ET_DECLARE(
    // Whether depthwise_forward takes a call with this input, window and channel multiplier m: every call whose
    // zero-padded plane (kernels/core/depthwise_conv2d_rows.h) fits int64, as libtorch's CPU kernel.
    bool depthwise_takes(const Tensor& x, const fold::Window& w, int64_t m);
    // out (resized) = depthwise_conv2d(x, weight, bias) for a call depthwise_takes.
    void depthwise_forward(KernelRuntimeContext& ctx, const Tensor& x, const Tensor& weight, const Tensor* bias,
                           const fold::Window& w, Tensor& out);
    // out = F::forward(args, inputs[0], ...) elementwise, for the pointwise family F (kernels/<op>.h), every
    // tensor checked to be of out's dtype, size and default dim order and every argument to be in its range
    // (kernels/executorch/pointwise.h).
    template <typename F> struct PointwiseForward {
      static void run(KernelRuntimeContext& ctx, const Tensor* const* inputs, const pw::ArgsOf<F>& args,
                      Tensor& out);
    };)

// Whether this process runs the AVX2 build: a processor with AVX2, FMA and F16C, unless ATEN_CPU_CAPABILITY is
// "default" (as ATen, and customops' libtorch kernels, honour it).
bool runs_avx2();

} // namespace customops::executorch_kernels

// The build of kernel `name` that this processor runs. Where no AVX2 build exists (other processors) its symbols
// are never named.
#if defined(CUSTOMOPS_ET_HAVE_AVX2)
#define CUSTOMOPS_ET_KERNEL(name)                                                             \
  (::customops::executorch_kernels::runs_avx2() ? &::customops::executorch_kernels::AVX2::name \
                                                 : &::customops::executorch_kernels::DEFAULT::name)
#else
#define CUSTOMOPS_ET_KERNEL(name) (&::customops::executorch_kernels::DEFAULT::name)
#endif
