// Argument checks shared by every backend's kernels (CPU, CUDA and Meta run the
// same checks, so torch.compile reports bad inputs at trace time too).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymBool.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/safe_numerics.h>

#include <optional>

namespace customops::checks {

// A condition on sizes that may be symbolic (Meta kernels under
// torch.compile(dynamic=True)): a symbolic one is decided, and guarded on.
inline bool holds(bool b) {
  return b;
}
inline bool holds(const c10::SymBool& b) {
  return b.guard_bool(__FILE__, __LINE__);
}

// The value of a size that may be symbolic, where it is known (always for
// int64_t); the overflow checks below run on known values only, since a
// symbolic size is checked again by the real kernel once it is known.
inline std::optional<int64_t> known(int64_t v) {
  return v;
}
inline std::optional<int64_t> known(const c10::SymInt& v) {
  return v.maybe_as_int();
}

// a * b and a + b where they fit int64: without the check, a product of huge
// arguments wraps (to 0, or to a small size the kernels then index past).
inline std::optional<int64_t> mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return c10::mul_overflows(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
}
inline std::optional<int64_t> add(int64_t a, int64_t b) {
  int64_t r = 0;
  return c10::add_overflows(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
}

// Whether a tensor of these sizes (and elements of this many bytes) can be
// described at all: its strides and byte count fit int64. An empty dimension
// counts as one, as it does in contiguous strides. Where not, at::empty fails
// with a message that names no argument, so the ops check it first.
bool sizes_fit(c10::ArrayRef<int64_t> sizes, int64_t element_size);
bool sizes_fit(c10::ArrayRef<c10::SymInt> sizes, int64_t element_size);

// The result of `op` with these sizes must be describable (sizes_fit); `from`
// names the arguments that set its size.
template <typename Int>
void result_fits(const char* op, c10::ArrayRef<Int> sizes, const at::Tensor& like, const char* from) {
  TORCH_CHECK(sizes_fit(sizes, like.element_size()), "customops::", op, ": the result's sizes ", sizes,
              " (from ", from, ") overflow int64");
}

// t must be a tensor (None becomes an undefined tensor).
void defined(const char* op, const char* arg, const at::Tensor& t);

// A dense copy of t (what the kernels make of an expanded or strided tensor)
// must be describable: an expanded tensor may have more elements than fit.
void dense_fits(const char* op, const char* arg, const at::Tensor& t);

// t must be float16, bfloat16, float32 or float64.
void floating(const char* op, const char* arg, const at::Tensor& t);
// a and b on one device.
void same_device(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                 const at::Tensor& b);
void same_dtype(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                const at::Tensor& b);
void same_shape(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                const at::Tensor& b);

} // namespace customops::checks
