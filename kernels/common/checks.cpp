#include "kernels/common/checks.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace customops::checks {

namespace {

template <typename Int>
bool fit(c10::ArrayRef<Int> sizes, int64_t element_size) {
  std::optional<int64_t> total = element_size;
  for (const auto& s : sizes) {
    const auto v = known(s);
    if (!v.has_value()) return true;  // symbolic: the kernel that runs on the real sizes checks
    if (*v < 0) return false;
    total = mul(*total, std::max<int64_t>(*v, 1));
    if (!total.has_value()) return false;
  }
  return true;
}

} // namespace

bool sizes_fit(c10::ArrayRef<int64_t> sizes, int64_t element_size) {
  return fit(sizes, element_size);
}

bool sizes_fit(c10::ArrayRef<c10::SymInt> sizes, int64_t element_size) {
  return fit(sizes, element_size);
}

void defined(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "customops::", op, ": expected ", arg, " to be a tensor, got None");
}

void dense_fits(const char* op, const char* arg, const at::Tensor& t) {
  if (!t.defined()) return;
  TORCH_CHECK(sizes_fit(t.sym_sizes(), t.element_size()), "customops::", op, ": ", arg, " of sizes ", t.sym_sizes(),
              " has more elements than a dense tensor can hold (the kernels need it dense)");
}

void floating(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "customops::", op, ": expected ", arg, " to be a tensor, got None");
  const auto st = t.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16,
              "customops::", op, ": expected ", arg,
              " to be a floating-point tensor (float16, bfloat16, float32 or float64), got ", st);
}

void same_device(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                 const at::Tensor& b) {
  // The CUDA kernels compare devices first, before the shape checks that name a missing tensor.
  defined(op, arg_a, a);
  defined(op, arg_b, b);
  TORCH_CHECK(a.device() == b.device(), "customops::", op, ": expected ", arg_a, " and ", arg_b,
              " on the same device, got ", arg_a, " on ", a.device(), " and ", arg_b, " on ",
              b.device());
}

void same_dtype(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "customops::", op, ": expected ", arg_a,
              " to have the dtype of ", arg_b, " (", b.scalar_type(), "), got ", a.scalar_type());
}

void same_shape(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                const at::Tensor& b) {
  TORCH_CHECK(a.sym_sizes() == b.sym_sizes(), "customops::", op, ": expected ", arg_a,
              " to have the shape of ", arg_b, " ", b.sym_sizes(), ", got ", a.sym_sizes());
}

} // namespace customops::checks
