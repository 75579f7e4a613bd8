# scaffold: the family's torch.func rules in a paragraph | """torch.func support of trilinear_interpolation and its backward: TODO(trilinear_interpolation)."""
"""torch.func support of trilinear_interpolation and its backward.

Every point is independent, so vmap folds the vmapped dimension into N. The
derivatives in points use the corner weights and their first and second
derivatives, as registration/trilinear.cpp does, in ATen ops so that every
transform composes with them.
"""
# scaffold-end

from __future__ import annotations

import torch

from ._common import add, batch_first, below_autograd, mask_of, ops, register


# scaffold: the maths the rules share (ATen operations) |
def _compute_dtype(feats, points):
    # As the kernels (kernels/trilinear.h): feats' dtype, float32 for half feats
    # with points of another dtype; coordinates are never rounded to a half type.
    if feats.dtype == points.dtype:
        return feats.dtype
    return torch.float32 if feats.dtype in (torch.float16, torch.bfloat16) else feats.dtype


def _corner_terms(points):
    """Corner weights w (N, 8), first derivatives (N, 8, 3) and second
    derivatives (N, 8, 3, 3) in the points. Corner k has bits (k>>2, k>>1, k) & 1;
    each weight is a product of one linear factor per axis, so d2w/dp_d^2 = 0."""
    k = torch.arange(8, device=points.device)
    bits = torch.stack([(k >> (2 - d)) & 1 for d in range(3)], 1).to(points.dtype)  # (8, 3)
    sign = bits * 2 - 1
    t = ((points + 1) * 0.5).unsqueeze(-2)  # (N, 1, 3)
    f = bits * t + (1 - bits) * (1 - t)  # (N, 8, 3)
    fa = f.unbind(-1)
    w = fa[0] * fa[1] * fa[2]
    first = 0.5 * sign * torch.stack([fa[1] * fa[2], fa[0] * fa[2], fa[0] * fa[1]], -1)
    rows = [torch.stack([torch.zeros_like(fa[0]) if d == e else 0.25 * sign[:, d] * sign[:, e] * fa[3 - d - e]
                         for e in range(3)], -1) for d in range(3)]
    return w, first, torch.stack(rows, -2)


def _points_tangent(first, tp, feats, cdt):
    """sum_k (dw_k/dp . tp) feats_k: how the output moves with the points."""
    return torch.einsum("nk,nkf->nf", torch.einsum("nkd,nd->nk", first, tp.to(cdt)).to(feats.dtype), feats)
# scaffold-end


class TrilinearInterpolation(torch.autograd.Function):
    @staticmethod
    def forward(feats, points):
        with below_autograd():
            return ops.trilinear_interpolation(feats, points)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        feats, points = ctx.saved_tensors
        return ops.trilinear_interpolation_backward(grad, feats, points, mask_of(ctx, 2))

    @staticmethod
    def jvp(ctx, t_feats, t_points):
        # scaffold: the forward-mode formula (jvp) | raise NotImplementedError("TODO(trilinear_interpolation)")
        feats, points = ctx.saved_tensors
        out = None if t_feats is None else ops.trilinear_interpolation(t_feats, points)
        if t_points is not None:
            cdt = _compute_dtype(feats, points)
            out = add(out, _points_tangent(_corner_terms(points.to(cdt))[1], t_points, feats, cdt))
        return out
        # scaffold-end

    @staticmethod
    def vmap(info, in_dims, feats, points):
        # scaffold: the vmap rule | raise NotImplementedError("TODO(trilinear_interpolation)")
        n = info.batch_size
        feats, points = batch_first(feats, in_dims[0], n), batch_first(points, in_dims[1], n)
        if feats.dim() != 4 or points.dim() != 3:
            ops.trilinear_interpolation(feats[0], points[0])  # raises the op's message
        out = ops.trilinear_interpolation(feats.flatten(0, 1), points.flatten(0, 1))
        return out.unflatten(0, (n, -1)), 0
        # scaffold-end


class TrilinearInterpolationBackward(torch.autograd.Function):
    # (g, feats, points) -> (gf, gp) = (w g, J^T s), s_k = feats_k . g, None where
    # output_mask says so: bilinear in (g, feats), smooth in points.

    @staticmethod
    def forward(g, feats, points, mask):
        with below_autograd():
            return ops.trilinear_interpolation_backward(g, feats, points, mask)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mask = inputs[3]
        ctx.save_for_backward(*inputs[:3])
        ctx.save_for_forward(*inputs[:3])
        ctx.set_materialize_grads(False)

    # scaffold: the double backward's formulas |
    # For upstream gradients A (of gf) and B (of gp), c_k = sum_d B_d J_kd:
    #   d g = sum_k w_k A_k + sum_k c_k feats_k,   d feats = c_k g,
    #   d points = sum_k J_ke (A_k . g) + sum_{k,d} B_d H_kde s_k   (registration/trilinear.cpp)
    # scaffold-end
    @staticmethod
    def backward(ctx, a, b):
        # scaffold: the backward op's gradients (the double backward) | raise NotImplementedError("TODO(trilinear_interpolation)")
        g, feats, points = ctx.saved_tensors
        need_g, need_feats, need_points = mask_of(ctx, 3)
        fdt, cdt = feats.dtype, _compute_dtype(feats, points)
        w, first, second = _corner_terms(points.to(cdt))
        c = None if b is None else torch.einsum("nd,nkd->nk", b.to(cdt), first)
        dg = df = dp = None
        if need_g:
            dg = None if a is None else torch.einsum("nk,nkf->nf", w.to(fdt), a)
            dg = add(dg, None if c is None else torch.einsum("nk,nkf->nf", c.to(fdt), feats))
        if need_feats and c is not None:
            df = c.to(fdt).unsqueeze(-1) * g.unsqueeze(-2)
        if need_points:
            if a is not None:
                dp = torch.einsum("nke,nk->ne", first, torch.einsum("nkf,nf->nk", a, g).to(cdt))
            if b is not None:
                s = torch.einsum("nkf,nf->nk", feats, g).to(cdt)
                dp = add(dp, torch.einsum("nkde,nd,nk->ne", second, b.to(cdt), s))
            dp = None if dp is None else dp.to(points.dtype)
        return dg, df, dp, None
        # scaffold-end

    # scaffold: the backward op's forward-mode formula |
    # t(gf) = w tg + (J tp) g;  t(gp) = J^T (feats . tg + t_feats . g) + H tp s.
    # scaffold-end
    @staticmethod
    def jvp(ctx, tg, t_feats, t_points, _):
        # scaffold: the jvp of the backward op | raise NotImplementedError("TODO(trilinear_interpolation)")
        g, feats, points = ctx.saved_tensors
        mask = list(ctx.mask)
        cdt = _compute_dtype(feats, points)
        tgf = tgp = None
        if tg is not None:
            tgf, tgp = ops.trilinear_interpolation_backward(tg, feats, points, mask)
        if mask[1] and t_feats is not None:
            tgp = add(tgp, ops.trilinear_interpolation_backward(g, t_feats, points, [False, True])[1])
        if t_points is not None:
            _, first, second = _corner_terms(points.to(cdt))
            if mask[0]:
                jt = torch.einsum("nkd,nd->nk", first, t_points.to(cdt)).to(feats.dtype)
                tgf = add(tgf, jt.unsqueeze(-1) * g.unsqueeze(-2))
            if mask[1]:
                s = torch.einsum("nkf,nf->nk", feats, g).to(cdt)
                tgp = add(tgp, torch.einsum("nkde,ne,nk->nd", second, t_points.to(cdt), s).to(points.dtype))
        zeros = (torch.zeros_like(feats), torch.zeros_like(points))
        return tuple(None if not m else (t if t is not None else z) for m, t, z in zip(mask, (tgf, tgp), zeros))
        # scaffold-end

    @staticmethod
    def vmap(info, in_dims, g, feats, points, mask):
        # scaffold: the vmap rule of the backward op | raise NotImplementedError("TODO(trilinear_interpolation)")
        n = info.batch_size
        g, feats, points = (batch_first(t, d, n) for t, d in zip((g, feats, points), in_dims))
        if g.dim() != 3 or feats.dim() != 4 or points.dim() != 3:
            ops.trilinear_interpolation_backward(g[0], feats[0], points[0], mask)  # raises the op's message
        out = ops.trilinear_interpolation_backward(g.flatten(0, 1), feats.flatten(0, 1), points.flatten(0, 1), mask)
        out = tuple(None if t is None else t.unflatten(0, (n, -1)) for t in out)
        return out, tuple(None if t is None else 0 for t in out)
        # scaffold-end


register("trilinear_interpolation", TrilinearInterpolation)
register("trilinear_interpolation_backward", TrilinearInterpolationBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    (
        # scaffold: its row in the torch.func table: the op(s), the vmap rule, the forward-mode formula | "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)",
        "`trilinear_interpolation`, `_backward`",
        "folded into N",
        "feats: the op on the tangent; points: corner-weight derivatives (ATen `einsum`)",
        # scaffold-end
    ),
]
