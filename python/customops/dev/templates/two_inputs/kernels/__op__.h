// __op__: TODO(__op__): what the family computes, in a paragraph: its definition, its arguments, its result.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"

namespace customops {

namespace __op___impl {

using Grads = std::tuple<at::Tensor, at::Tensor>;  // (a's gradient, b's), undefined where output_mask says

// The checks every backend runs (CPU, CUDA and Meta, so that torch.compile reports bad inputs at trace time),
// each message naming the op and the argument. Sizes may be symbolic (the Meta kernel under dynamic shapes):
// test conditions on them with checks::holds. a and b have one dtype, in which the op computes.
inline void check(const char* op, const at::Tensor& a, const at::Tensor& b) {
  checks::defined(op, "a", a);
  checks::defined(op, "b", b);
  checks::floating(op, "a", a);
  checks::floating(op, "b", b);
  // TODO(__op__): a's and b's ranks and sizes, and the op's other arguments: TORCH_CHECK(cond, "customops::", op, ...).
  checks::same_dtype(op, "b", b, "a", a);
  checks::same_device(op, "b", b, "a", a);
  checks::dense_fits(op, "a", a);
  checks::dense_fits(op, "b", b);
}

// The result's sizes for a's and b's, symbolic under torch.compile(dynamic=True): the kernels' plans, the Meta
// kernel and the check of the backward's grad_out take them from here.
inline std::vector<c10::SymInt> out_sizes(const at::Tensor& a, const at::Tensor& b) {
  return a.sym_sizes().vec();  // TODO(__op__): the result's sizes from a's and b's (and the op's arguments)
}

inline void check_grad_out(const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b) {
  const char* op = "__op___backward";
  checks::defined(op, "grad_out", grad_out);
  checks::floating(op, "grad_out", grad_out);
  const auto sizes = out_sizes(a, b);
  TORCH_CHECK(grad_out.sym_sizes().equals(sizes), "customops::", op, ": expected grad_out of the result's shape ",
              c10::SymIntArrayRef(sizes), ", got ", grad_out.sym_sizes());
  checks::same_dtype(op, "grad_out", grad_out, "a", a);
  checks::same_device(op, "grad_out", grad_out, "a", a);
  checks::dense_fits(op, "grad_out", grad_out);
}

// What the element functions below index by, set once per call (sizes_of) and passed by value to every
// element's call, on the host and on the device.
struct Sizes {
  int64_t a_numel = 0;
  int64_t b_numel = 0;
  int64_t out_numel = 0;  // the result's
  // TODO(__op__): the sizes the element functions need: the rows, the window, the channels.
};

inline Sizes sizes_of(const at::Tensor& a, const at::Tensor& b, const at::Tensor& result) {
  Sizes s;
  s.a_numel = a.numel();
  s.b_numel = b.numel();
  s.out_numel = result.numel();
  // TODO(__op__): the other fields of Sizes, from a's and b's sizes (contiguous) and the op's arguments.
  return s;
}

// The maths, shared by the CPU and CUDA kernels: one element at a time, reading a and b (contiguous) and
// writing nothing, so that the kernels need no atomics and give the same bits on every run. In opmath_t (float
// for the half types); indices are int64.

// The result's element i.
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
C10_HOST_DEVICE inline opmath_t forward_element(const scalar_t* a, const scalar_t* b, const Sizes& s, int64_t i) {
  return opmath_t(NAN);  // TODO(__op__): the result's element i, from the elements of a and b it reads
}

// a's gradient at its element j: the sum, over the result's elements that read a[j], of grad_out there times
// their derivative in a[j].
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
C10_HOST_DEVICE inline opmath_t grad_a_element(const scalar_t* grad_out, const scalar_t* a, const scalar_t* b,
                                               const Sizes& s, int64_t j) {
  return opmath_t(NAN);  // TODO(__op__): a's gradient at j, from grad_out (the result's shape), a and b
}

// b's gradient at its element k, the same way.
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
C10_HOST_DEVICE inline opmath_t grad_b_element(const scalar_t* grad_out, const scalar_t* a, const scalar_t* b,
                                               const Sizes& s, int64_t k) {
  return opmath_t(NAN);  // TODO(__op__): b's gradient at k, from grad_out, a and b
}

// What a CPU or CUDA kernel needs once the arguments are checked: contiguous inputs, the results allocated
// (contiguous: the Meta kernels promise the same strides; a gradient only where output_mask asks) and the sizes.
struct Plan {
  at::Tensor grad, a, b;  // grad only for the backward
  at::Tensor result;      // the forward's
  at::Tensor grad_a, grad_b;
  Sizes sizes;
};

inline Plan plan_forward(const at::Tensor& a, const at::Tensor& b) {
  check("__op__", a, b);
  const auto sizes = out_sizes(a, b);
  checks::result_fits("__op__", c10::SymIntArrayRef(sizes), a, "a and b");
  Plan p;
  p.a = a.contiguous();
  p.b = b.contiguous();
  p.result = at::empty_symint(sizes, a.options());
  p.sizes = sizes_of(p.a, p.b, p.result);
  return p;
}

inline Plan plan_backward(const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b,
                          std::array<bool, 2> output_mask) {
  check("__op___backward", a, b);
  check_grad_out(grad_out, a, b);
  Plan p;
  p.grad = grad_out.contiguous();
  p.a = a.contiguous();
  p.b = b.contiguous();
  if (output_mask[0]) p.grad_a = at::empty(a.sizes(), a.options());
  if (output_mask[1]) p.grad_b = at::empty(b.sizes(), b.options());
  p.sizes = sizes_of(p.a, p.b, p.grad);
  return p;
}

} // namespace __op___impl

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor __op__(const at::Tensor& a, const at::Tensor& b);
    __op___impl::Grads __op___backward(const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b,
                                       std::array<bool, 2> output_mask);)
} // namespace cpu

namespace cuda {
at::Tensor __op__(const at::Tensor& a, const at::Tensor& b);
__op___impl::Grads __op___backward(const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b,
                                   std::array<bool, 2> output_mask);
} // namespace cuda

namespace meta {
at::Tensor __op__(const at::Tensor& a, const at::Tensor& b);
__op___impl::Grads __op___backward(const at::Tensor& grad_out, const at::Tensor& a, const at::Tensor& b,
                                   std::array<bool, 2> output_mask);
} // namespace meta

} // namespace customops
