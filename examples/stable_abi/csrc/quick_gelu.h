// quick_gelu built against LibTorch's stable ABI only: torch/csrc/stable and
// torch/headeronly, which reach libtorch through its C shim (aoti_torch_*,
// torch_*). No ATen or c10 header may be included here: with
// TORCH_TARGET_VERSION defined they refuse to compile, and a mangled libtorch
// symbol would tie the binary to one torch release again.
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch_v2.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include <cmath>
#include <sstream>
#include <string>

namespace customops_stable {

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

// Same formulas as kernels/quick_gelu.h of the full library (that header pulls
// in ATen, so it cannot be shared with this build).
namespace math {

constexpr double kAlpha = 1.702;

// x / (1 + exp(-a x)) rather than x * sigmoid(a x): for very negative x the
// exponential overflows to inf and the quotient is -0, never inf * 0 = NaN.
template <typename T>
C10_HOST_DEVICE inline T forward(T x) {
  using std::exp;
  return x / (T(1) + exp(-T(kAlpha) * x));
}

// d/dx [x s(a x)] = s + a x s (1 - s), with s = sigmoid(a x).
template <typename T>
C10_HOST_DEVICE inline T backward(T grad, T x) {
  using std::exp;
  const T s = T(1) / (T(1) + exp(-T(kAlpha) * x));
  return grad * (s + T(kAlpha) * x * s * (T(1) - s));
}

// at::opmath_type is not part of the stable headers: half types are computed
// in float, as ATen does, and rounded once on the way out.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<c10::Half> {
  using type = float;
};
template <>
struct OpMath<c10::BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

} // namespace math

// The stable Device and shape types have no operator<<; error messages need them.
inline std::string describe(const torch::stable::Device& d) {
  std::ostringstream os;
  if (d.is_cpu()) {
    os << "cpu";
  } else if (d.is_cuda()) {
    os << "cuda:" << d.index();
  } else {
    os << "device type " << static_cast<int>(d.type()) << ":" << d.index();
  }
  return os.str();
}

inline std::string describe(torch::headeronly::IntHeaderOnlyArrayRef sizes) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    os << (i ? ", " : "") << sizes[i];
  }
  os << "]";
  return os.str();
}

// Argument checks, with the messages of the full library. STD_TORCH_CHECK
// throws std::runtime_error, which reaches Python as RuntimeError.
namespace checks {

inline void floating(const char* op, const char* arg, const Tensor& t) {
  STD_TORCH_CHECK(t.defined(), "customops_stable::", op, ": expected ", arg, " to be a tensor, got None");
  const auto st = t.scalar_type();
  STD_TORCH_CHECK(st == ScalarType::Float || st == ScalarType::Double || st == ScalarType::Half ||
                      st == ScalarType::BFloat16,
                  "customops_stable::", op, ": expected ", arg,
                  " to be a floating-point tensor (float16, bfloat16, float32 or float64), got ",
                  torch::headeronly::toString(st));
}

inline void quick_gelu(const Tensor& x) {
  floating("quick_gelu", "x", x);
}

inline void quick_gelu_backward(const Tensor& grad_out, const Tensor& x) {
  const char* op = "quick_gelu_backward";
  floating(op, "x", x);
  floating(op, "grad_out", grad_out);
  STD_TORCH_CHECK(grad_out.device() == x.device(), "customops_stable::", op,
                  ": expected grad_out and x on the same device, got grad_out on ", describe(grad_out.device()),
                  " and x on ", describe(x.device()));
  STD_TORCH_CHECK(grad_out.scalar_type() == x.scalar_type(), "customops_stable::", op,
                  ": expected grad_out to have the dtype of x (", torch::headeronly::toString(x.scalar_type()),
                  "), got ", torch::headeronly::toString(grad_out.scalar_type()));
  STD_TORCH_CHECK(grad_out.sizes().equals(x.sizes()), "customops_stable::", op,
                  ": expected grad_out to have the shape of x ", describe(x.sizes()), ", got ",
                  describe(grad_out.sizes()));
}

} // namespace checks

namespace layout {

// The output of an elementwise op. aten::empty_like keeps x's strides when x is
// dense in any dimension order (channels_last stays channels_last) and picks a
// dense layout otherwise, so the result is always one gap-free block. The fake
// kernel (customops_stable.py) is torch.empty_like(x) for the same reason.
inline Tensor elementwise_output(const Tensor& x) {
  return torch::stable::empty_like(x);
}

// t itself when it is laid out exactly as out (then both are one flat block in
// the same element order), else a copy of t in out's layout. The stable Tensor
// has no is_non_overlapping_and_dense(); equal strides to a tensor that
// empty_like made implies it. This is also the path that makes sliced,
// transposed or expanded inputs dense.
inline Tensor like(const Tensor& t, const Tensor& out) {
  if (t.strides().equals(out.strides())) {
    return t;
  }
  Tensor copy = torch::stable::empty_like(out);
  torch::stable::copy_(copy, t);
  return copy;
}

} // namespace layout

// Kernels, one per backend, registered by the translation unit that defines them.
namespace cpu {
Tensor quick_gelu(const Tensor& x);
Tensor quick_gelu_backward(const Tensor& grad_out, const Tensor& x);
} // namespace cpu

namespace cuda {
Tensor quick_gelu(const Tensor& x);
Tensor quick_gelu_backward(const Tensor& grad_out, const Tensor& x);
} // namespace cuda

} // namespace customops_stable

// THO_DISPATCH_V2 (torch/headeronly) is AT_DISPATCH_V2 without libtorch: the
// body sees scalar_t for each listed dtype; any other dtype throws.
#define CUSTOMOPS_STABLE_DISPATCH_FLOATING(TYPE, NAME, ...)                                            \
  THO_DISPATCH_V2(TYPE, NAME, AT_WRAP(__VA_ARGS__), AT_EXPAND(AT_FLOATING_TYPES),                     \
                  torch::headeronly::ScalarType::Half, torch::headeronly::ScalarType::BFloat16)
