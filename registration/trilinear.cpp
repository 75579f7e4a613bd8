// Kernels of trilinear_interpolation for every dispatch key, and its autograd.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <customops/trilinear.h>

#include "kernels/trilinear.h"
#include "registration/autocast.h"
// scaffold-if executorch
#include "registration/out_variant.h"
// scaffold-end

namespace customops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Mask = std::array<bool, 2>;

class TrilinearFunction : public torch::autograd::Function<TrilinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& feats, const at::Tensor& points) {
    ctx->save_for_backward({feats, points});
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::trilinear_interpolation_op().call(feats, points);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Mask mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    auto [gf, gp] = detail::trilinear_interpolation_backward_op().call(grads[0], saved[0], saved[1], mask);
    return {gf, gp};
  }
};

// scaffold: the maths the double backward uses, and its formulas in a comment |
// The corner weights w (N, 8) of the points and their first (N, 8, 3) and
// second (N, 8, 3, 3) derivatives, in ATen ops so that they differentiate
// further. Each weight is a product of one linear factor per axis, so d2w/dp_d^2 = 0.
struct CornerTerms {
  at::Tensor w, first, second;
};

CornerTerms corner_terms(const at::Tensor& points) {
  const auto k = at::arange(trilinear::kCorners, points.options().dtype(at::kLong));
  std::vector<at::Tensor> bit_list;
  for (int d = 0; d < 3; ++d) bit_list.push_back(k.bitwise_right_shift(2 - d).bitwise_and(1));
  const auto bits = at::stack(bit_list, 1).to(points.scalar_type());  // (8, 3)
  const auto sign = bits * 2 - 1;
  const auto t = ((points + 1) * 0.5).unsqueeze(1);                  // (N, 1, 3)
  const auto f = bits * t + (1 - bits) * (1 - t);                    // (N, 8, 3)
  const at::Tensor fa[3] = {f.select(2, 0), f.select(2, 1), f.select(2, 2)};
  CornerTerms c;
  c.w = fa[0] * fa[1] * fa[2];
  c.first = 0.5 * sign * at::stack({fa[1] * fa[2], fa[0] * fa[2], fa[0] * fa[1]}, 2);
  std::vector<at::Tensor> rows;
  for (int d = 0; d < 3; ++d) {
    std::vector<at::Tensor> row;
    for (int e = 0; e < 3; ++e) {
      row.push_back(d == e ? at::zeros_like(fa[0])
                           : 0.25 * sign.select(1, d) * sign.select(1, e) * fa[3 - d - e]);
    }
    rows.push_back(at::stack(row, 2));
  }
  c.second = at::stack(rows, 2);  // (N, 8, 3, 3)
  return c;
}

// The backward op maps (g, feats, points) to gf = w g and gp = J^T s with
// s_k = feats_k . g: bilinear in (g, feats) and smooth in points. Its
// derivatives for upstream gradients A (of gf) and B (of gp):
//   d g      = sum_k w_k A_k + sum_k c_k feats_k,  c_k = sum_d B_d J_kd
//   d feats  = c_k g
//   d points = sum_k J_ke (A_k . g) + sum_{k,d} B_d H_kde s_k
// With mixed dtypes the corner terms are computed in the kernels' compute
// dtype (opmath of feats' dtype, never a half type for the coordinates); the
// (N, 8) terms meet feats-sized tensors in feats' dtype and the (N, 8)
// reductions of feats-sized tensors meet the corner terms in the compute
// dtype, so nothing of feats' size is converted. With one dtype every cast
// below is a no-op.
// scaffold-end
class TrilinearBackwardFunction : public torch::autograd::Function<TrilinearBackwardFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& feats,
                               const at::Tensor& points, Mask mask) {
    ctx->save_for_backward({g, feats, points});
    ctx->saved_data["mask"] = c10::List<bool>({mask[0], mask[1]});
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [gf, gp] = detail::trilinear_interpolation_backward_op().call(g, feats, points, mask);
    variable_list out;
    for (auto* t : {&gf, &gp}) {
      if (t->defined()) out.push_back(*t);
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    // scaffold: the backward op's gradients (the double backward), in ATen operations | TORCH_CHECK(false, "customops::trilinear_interpolation_backward: TODO(trilinear_interpolation)"); return {};
    const auto &g = saved[0], &feats = saved[1], &points = saved[2];
    const auto mask = ctx->saved_data["mask"].toBoolList();
    at::Tensor upstream[2];
    for (size_t k = 0, next = 0; k < 2; ++k) {
      if (mask[k]) upstream[k] = grads[next++];
    }
    const auto &A = upstream[0], &B = upstream[1];
    const auto fdt = feats.scalar_type();
    const auto cdt = fdt == points.scalar_type() ? fdt : at::toOpMathType(fdt);
    const auto terms = corner_terms(points.to(cdt));
    at::Tensor c;  // (N, 8)
    if (B.defined()) c = at::einsum("nd,nkd->nk", {B.to(cdt), terms.first});
    at::Tensor dg, dfeats, dpoints;
    auto add = [](at::Tensor& acc, const at::Tensor& term) { acc = acc.defined() ? acc + term : term; };
    if (ctx->needs_input_grad(0)) {
      if (A.defined()) add(dg, at::einsum("nk,nkf->nf", {terms.w.to(fdt), A}));
      if (c.defined()) add(dg, at::einsum("nk,nkf->nf", {c.to(fdt), feats}));
    }
    if (ctx->needs_input_grad(1) && c.defined()) dfeats = c.to(fdt).unsqueeze(2) * g.unsqueeze(1);
    if (ctx->needs_input_grad(2)) {
      if (A.defined()) {
        add(dpoints, at::einsum("nke,nk->ne", {terms.first, at::einsum("nkf,nf->nk", {A, g}).to(cdt)}));
      }
      if (B.defined()) {
        const auto s = at::einsum("nkf,nf->nk", {feats, g}).to(cdt);
        add(dpoints, at::einsum("nkde,nd,nk->ne", {terms.second, B.to(cdt), s}));
      }
      if (dpoints.defined()) dpoints = dpoints.to(points.scalar_type());
    }
    return {dg, dfeats, dpoints, {}};
    // scaffold-end
  }

  static detail::TrilinearGrads apply(const at::Tensor& g, const at::Tensor& feats, const at::Tensor& points,
                                      Mask mask) {
    const auto out = torch::autograd::Function<TrilinearBackwardFunction>::apply(g, feats, points, mask);
    at::Tensor r[2];
    for (size_t k = 0, next = 0; k < 2; ++k) {
      if (mask[k]) r[k] = out[next++];
    }
    return {r[0], r[1]};
  }
};

at::Tensor trilinear_autograd(const at::Tensor& feats, const at::Tensor& points) {
  // None fails here with its name, not in autograd's bookkeeping.
  checks::defined("trilinear_interpolation", "feats", feats);
  checks::defined("trilinear_interpolation", "points", points);
  if (!at::GradMode::is_enabled() || !(feats.requires_grad() || points.requires_grad())) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return detail::trilinear_interpolation_op().call(feats, points);
  }
  return TrilinearFunction::apply(feats, points);
}

detail::TrilinearGrads trilinear_backward_autograd(const at::Tensor& g, const at::Tensor& feats,
                                                   const at::Tensor& points, Mask mask) {
  checks::defined("trilinear_interpolation_backward", "grad_out", g);
  checks::defined("trilinear_interpolation_backward", "feats", feats);
  checks::defined("trilinear_interpolation_backward", "points", points);
  return TrilinearBackwardFunction::apply(g, feats, points, mask);
}

// scaffold-if executorch
at::Tensor& trilinear_interpolation_out(const at::Tensor& feats, const at::Tensor& points, at::Tensor& out) {
  return out_variant::into("trilinear_interpolation.out", detail::trilinear_interpolation_op().call(feats, points),
                           out);
}
// scaffold-end

} // namespace
} // namespace customops

TORCH_LIBRARY_IMPL(customops, CPU, m) {
  m.impl("trilinear_interpolation", CUSTOMOPS_CPU_KERNEL(trilinear_interpolation));
  m.impl("trilinear_interpolation_backward", CUSTOMOPS_CPU_KERNEL(trilinear_interpolation_backward));
}

#if defined(CUSTOMOPS_WITH_CUDA)
TORCH_LIBRARY_IMPL(customops, CUDA, m) {
  m.impl("trilinear_interpolation", &customops::cuda::trilinear_interpolation);
  m.impl("trilinear_interpolation_backward", &customops::cuda::trilinear_interpolation_backward);
}
#endif

// scaffold-if executorch
TORCH_LIBRARY_IMPL(customops, CompositeExplicitAutograd, m) {
  m.impl("trilinear_interpolation.out", TORCH_FN(customops::trilinear_interpolation_out));
}
// scaffold-end

TORCH_LIBRARY_IMPL(customops, Meta, m) {
  m.impl("trilinear_interpolation", &customops::meta::trilinear_interpolation);
  m.impl("trilinear_interpolation_backward", &customops::meta::trilinear_interpolation_backward);
}

TORCH_LIBRARY_IMPL(customops, Autograd, m) {
  m.impl("trilinear_interpolation", &customops::trilinear_autograd);
  m.impl("trilinear_interpolation_backward", &customops::trilinear_backward_autograd);
}

// scaffold: the autocast policy (registration/autocast.h) and why | CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("trilinear_interpolation", "trilinear_interpolation_backward")  // TODO(trilinear_interpolation)
// Autocast: no cast. The op takes feats and points of any floating dtypes and
// runs in feats' (kernels/trilinear.h), so AMP's low-precision feats from a
// Linear meet float32 points as they are, and the coordinates keep their
// precision.
CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("trilinear_interpolation", "trilinear_interpolation_backward")
// scaffold-end
