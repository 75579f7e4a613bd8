// The CPU kernels of __op__: loops over the elements of the result and of each gradient asked for, each element
// computed by the family's maths (kernels/__op__.h). Where the benchmark shows the need, a faster loop (a row at a
// time, vectorized) replaces them.
#include "kernels/__op__.h"
#include "kernels/cpu/common/parallel.h"

#include <ATen/Dispatch.h>

namespace customops::cpu::CPU_CAPABILITY {
namespace {

// out[i] = element(i) for i < n, in tasks of about 32K elements read (each reads `reads`).
template <typename scalar_t, typename Element>
void for_each_element(scalar_t* out, int64_t n, int64_t reads, const Element& element) {
  at::parallel_for(0, n, grain(reads), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<scalar_t>(element(i));
  });
}

} // namespace

at::Tensor __op__(const at::Tensor& a_in, const at::Tensor& b_in) {
  const auto plan = __op___impl::plan_forward(a_in, b_in);
  const at::Tensor &a = plan.a, &b = plan.b, &out = plan.result;
  if (out.numel() == 0) return out;
  const auto sizes = plan.sizes;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "__op___cpu", [&] {
    const scalar_t* ap = a.const_data_ptr<scalar_t>();
    const scalar_t* bp = b.const_data_ptr<scalar_t>();
    for_each_element(out.data_ptr<scalar_t>(), out.numel(), 1,
                     [&](int64_t i) { return __op___impl::forward_element(ap, bp, sizes, i); });
  });
  return out;
}

__op___impl::Grads __op___backward(const at::Tensor& grad_in, const at::Tensor& a_in, const at::Tensor& b_in,
                                   std::array<bool, 2> output_mask) {
  const auto plan = __op___impl::plan_backward(grad_in, a_in, b_in, output_mask);
  const at::Tensor &grad = plan.grad, &a = plan.a, &b = plan.b, &grad_a = plan.grad_a, &grad_b = plan.grad_b;
  const auto sizes = plan.sizes;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "__op___backward_cpu", [&] {
    const scalar_t* gp = grad.const_data_ptr<scalar_t>();
    const scalar_t* ap = a.const_data_ptr<scalar_t>();
    const scalar_t* bp = b.const_data_ptr<scalar_t>();
    if (grad_a.defined() && grad_a.numel() > 0) {
      for_each_element(grad_a.data_ptr<scalar_t>(), grad_a.numel(), 1,
                       [&](int64_t j) { return __op___impl::grad_a_element(gp, ap, bp, sizes, j); });
    }
    if (grad_b.defined() && grad_b.numel() > 0) {
      for_each_element(grad_b.data_ptr<scalar_t>(), grad_b.numel(), 1,
                       [&](int64_t k) { return __op___impl::grad_b_element(gp, ap, bp, sizes, k); });
    }
  });
  return {plan.grad_a, plan.grad_b};
}

} // namespace customops::cpu::CPU_CAPABILITY
