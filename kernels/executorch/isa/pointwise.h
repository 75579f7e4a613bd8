// The forward of a pointwise family in ExecuTorch's runtime, one build per instruction set: the formulas of
// kernels/<op>.h on at::vec's vectors, mapped over the tensors as libtorch's CPU kernels map them
// (kernels/core/pointwise_simd.h). cmake/CustomopsPointwise.cmake instantiates it for every pointwise family.
#pragma once

#include <array>
#include <utility>

// ExecuTorch's kernels link no Sleef: the formulas' tanh is made of exp_u20 (kernels/core/pointwise_simd.h).
#define CUSTOMOPS_POINTWISE_NO_SLEEF
#include "kernels/core/pointwise_simd.h"
#include "kernels/executorch/isa.h"

namespace customops::executorch_kernels::CPU_CAPABILITY {

namespace {

template <typename F, typename scalar_t, std::size_t... I>
void map_forward(const Tensor* const* inputs, const pw::ArgsOf<F>& args, Tensor& out, std::index_sequence<I...>) {
  pw::map_dense(kParallelFor, std::array<scalar_t*, 1>{out.mutable_data_ptr<scalar_t>()}, out.numel(),
                pw::ForwardMap<F>{args}, inputs[I]->const_data_ptr<scalar_t>()...);
}

} // namespace

template <typename F>
void PointwiseForward<F>::run(KernelRuntimeContext& ctx, const Tensor* const* inputs, const pw::ArgsOf<F>& args,
                               Tensor& out) {
  // Not double: at::vec's double exp is Sleef's, which only libtorch links (kernels/executorch/pointwise.h refuses
  // it, customops.executorch decomposes it).
  ET_SWITCH_THREE_TYPES(Float, Half, BFloat16, out.scalar_type(), ctx, "pointwise.out", scalar_t, [&] {
    map_forward<F, scalar_t>(inputs, args, out, std::make_index_sequence<pw::arity<F>>{});
  });
}

} // namespace customops::executorch_kernels::CPU_CAPABILITY
