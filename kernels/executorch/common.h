// What customops' ExecuTorch kernels share: ExecuTorch's tensor and kernel types, argument checks that log the
// argument's name, the accumulation type, and parallel loops over ExecuTorch's thread pool. The maths is the
// family's kernels/core/ header, which libtorch's CPU kernels call too.
#pragma once

#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/thread_parallel_interface.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace customops::executorch_kernels {

using ::executorch::aten::ScalarType;
using ::executorch::aten::Tensor;
using ::executorch::runtime::KernelRuntimeContext;

// The type a kernel accumulates in: float for the half types, as at::opmath_type.
template <typename T>
using opmath_t = std::conditional_t<std::is_same_v<T, ::executorch::aten::Half> ||
                                        std::is_same_v<T, ::executorch::aten::BFloat16>,
                                    float, T>;

// ExecuTorch's thread pool as the parallel loop the kernels of kernels/core/ take: (begin, end, grain, fn(begin, end)).
inline constexpr auto kParallelFor = [](int64_t begin, int64_t end, int64_t grain, const auto& fn) {
  ::executorch::extension::parallel_for(begin, end, grain, fn);
};

// Items per task for tasks of at least ~32K elements of work each, as the libtorch CPU kernels use.
inline int64_t grain(int64_t elements_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, elements_per_item));
}

// ExecuTorch's programs hand kernels tensors in a dim order; these kernels read contiguous (default-order) ones.
// (tensor_is_default_dim_order would log an error for every other.)
inline bool contiguous(const Tensor& t) {
  return ::executorch::runtime::is_contiguous_dim_order(t.dim_order().data(), size_t(t.dim()));
}

inline bool floating(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == ScalarType::Float || s == ScalarType::Double || s == ScalarType::Half || s == ScalarType::BFloat16;
}

} // namespace customops::executorch_kernels

// Fails the kernel, logging `customops::<op>: <message>`, unless cond holds.
#define CUSTOMOPS_ET_CHECK(ctx, cond, out, op, message, ...) \
  ET_KERNEL_CHECK_MSG(ctx, cond, InvalidArgument, out, "customops::" op ": " message, ##__VA_ARGS__)
