// __op__: TODO(__op__): what the family computes, in a paragraph: its definition, its arguments, its result.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/SymInt.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/checks.h"
#include "kernels/common/cpu_capability.h"

namespace customops {

namespace __op___impl {

// The checks every backend runs (CPU, CUDA and Meta, so that torch.compile reports bad inputs at trace time),
// each message naming the op and the argument. Sizes may be symbolic (the Meta kernel under dynamic shapes):
// test conditions on them with checks::holds.
inline void check(const char* op, const at::Tensor& x) {
  checks::defined(op, "x", x);
  checks::floating(op, "x", x);
  // TODO(__op__): x's rank and sizes, and the op's other arguments: TORCH_CHECK(cond, "customops::", op, ...).
  checks::dense_fits(op, "x", x);
}

// The result's sizes for x's, symbolic under torch.compile(dynamic=True): the kernels' plans, the Meta kernel
// and the check of the backward's grad_out take them from here.
inline std::vector<c10::SymInt> out_sizes(const at::Tensor& x) {
  return x.sym_sizes().vec();  // TODO(__op__): the result's sizes from x's (and the op's arguments)
}

inline void check_grad_out(const at::Tensor& grad_out, const at::Tensor& x) {
  const char* op = "__op___backward";
  checks::defined(op, "grad_out", grad_out);
  checks::floating(op, "grad_out", grad_out);
  const auto sizes = out_sizes(x);
  TORCH_CHECK(grad_out.sym_sizes().equals(sizes), "customops::", op, ": expected grad_out of the result's shape ",
              c10::SymIntArrayRef(sizes), ", got ", grad_out.sym_sizes());
  checks::same_dtype(op, "grad_out", grad_out, "x", x);
  checks::same_device(op, "grad_out", grad_out, "x", x);
  checks::dense_fits(op, "grad_out", grad_out);
}

// What the element functions below index by, set once per call (sizes_of) and passed by value to every
// element's call, on the host and on the device.
struct Sizes {
  int64_t numel = 0;      // x's elements
  int64_t out_numel = 0;  // the result's
  // TODO(__op__): the sizes the element functions need: the rows, the window, the reduced dimension's size.
};

inline Sizes sizes_of(const at::Tensor& x, const at::Tensor& result) {
  Sizes s;
  s.numel = x.numel();
  s.out_numel = result.numel();
  // TODO(__op__): the other fields of Sizes, from x's sizes (contiguous) and the op's arguments.
  return s;
}

// The maths, shared by the CPU and CUDA kernels: one element at a time, reading x (contiguous) and writing
// nothing, so that the kernels need no atomics and give the same bits on every run. In opmath_t (float for the
// half types); indices are int64.

// The result's element i.
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
C10_HOST_DEVICE inline opmath_t forward_element(const scalar_t* x, const Sizes& s, int64_t i) {
  return opmath_t(NAN);  // TODO(__op__): the result's element i, from the elements of x it reads
}

// x's gradient at its element j: the sum, over the result's elements that read x[j], of grad_out there times
// their derivative in x[j].
template <typename scalar_t, typename opmath_t = at::opmath_type<scalar_t>>
C10_HOST_DEVICE inline opmath_t backward_element(const scalar_t* grad_out, const scalar_t* x, const Sizes& s,
                                                 int64_t j) {
  return opmath_t(NAN);  // TODO(__op__): x's gradient at j, from grad_out (the result's shape) and x
}

// What a CPU or CUDA kernel needs once the arguments are checked: contiguous inputs, the result allocated
// (contiguous: the Meta kernel promises the same strides) and the sizes.
struct Plan {
  at::Tensor grad, x;  // grad only for the backward
  at::Tensor result;   // the forward's result, or the backward's x gradient
  Sizes sizes;
};

inline Plan plan_forward(const at::Tensor& x) {
  check("__op__", x);
  const auto sizes = out_sizes(x);
  checks::result_fits("__op__", c10::SymIntArrayRef(sizes), x, "x");
  Plan p;
  p.x = x.contiguous();
  p.result = at::empty_symint(sizes, x.options());
  p.sizes = sizes_of(p.x, p.result);
  return p;
}

inline Plan plan_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  check("__op___backward", x);
  check_grad_out(grad_out, x);
  Plan p;
  p.grad = grad_out.contiguous();
  p.x = x.contiguous();
  p.result = at::empty(x.sizes(), x.options());
  p.sizes = sizes_of(p.x, p.grad);
  return p;
}

} // namespace __op___impl

namespace cpu {
CUSTOMOPS_CPU_DECLARE(
    at::Tensor __op__(const at::Tensor& x);
    at::Tensor __op___backward(const at::Tensor& grad_out, const at::Tensor& x);)
} // namespace cpu

namespace cuda {
at::Tensor __op__(const at::Tensor& x);
at::Tensor __op___backward(const at::Tensor& grad_out, const at::Tensor& x);
} // namespace cuda

namespace meta {
at::Tensor __op__(const at::Tensor& x);
at::Tensor __op___backward(const at::Tensor& grad_out, const at::Tensor& x);
} // namespace meta

} // namespace customops
