// The CPU kernels of __op__: a loop over the result's elements, each computed by the family's maths
// (kernels/__op__.h). Where the benchmark shows the need, a faster loop (a row at a time, vectorized, a running
// window) replaces it.
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

at::Tensor __op__(const at::Tensor& x_in) {
  const auto plan = __op___impl::plan_forward(x_in);
  const at::Tensor &x = plan.x, &out = plan.result;
  if (out.numel() == 0) return out;
  const auto sizes = plan.sizes;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "__op___cpu", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    for_each_element(out.data_ptr<scalar_t>(), out.numel(), 1,
                     [&](int64_t i) { return __op___impl::forward_element(xp, sizes, i); });
  });
  return out;
}

at::Tensor __op___backward(const at::Tensor& grad_in, const at::Tensor& x_in) {
  const auto plan = __op___impl::plan_backward(grad_in, x_in);
  const at::Tensor &grad = plan.grad, &x = plan.x, &grad_x = plan.result;
  if (grad_x.numel() == 0) return grad_x;
  const auto sizes = plan.sizes;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "__op___backward_cpu", [&] {
    const scalar_t* gp = grad.const_data_ptr<scalar_t>();
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    for_each_element(grad_x.data_ptr<scalar_t>(), grad_x.numel(), 1,
                     [&](int64_t j) { return __op___impl::backward_element(gp, xp, sizes, j); });
  });
  return grad_x;
}

} // namespace customops::cpu::CPU_CAPABILITY
