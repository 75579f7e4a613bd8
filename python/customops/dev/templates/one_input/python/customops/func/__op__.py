"""torch.func support of __op__ and its backward: TODO(__op__): the family's rules in a paragraph."""

from __future__ import annotations

import torch

from ._common import below_autograd, ops, register, slice_by_slice


class __Op__(torch.autograd.Function):
    @staticmethod
    def forward(x):
        with below_autograd():
            return ops.__op__(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.__op___backward(grad, x)

    @staticmethod
    def jvp(ctx, t_x):
        # The result's tangent for x's tangent t_x: for an op linear in x, the op of t_x.
        raise NotImplementedError("TODO(__op__): the forward-mode formula")

    @staticmethod
    def vmap(info, in_dims, x):
        # Right for any op; an op with a batch dimension of its own makes one call (_common.fold_into_batch).
        return slice_by_slice(ops.__op__, info, in_dims, x)


class __Op__Backward(torch.autograd.Function):
    @staticmethod
    def forward(g, x):
        with below_autograd():
            return ops.__op___backward(g, x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, a):
        # The gradients of grad_out and x for the upstream gradient a of x's gradient, as registration/__op__.cpp
        # computes them (the double backward).
        raise NotImplementedError("TODO(__op__): the backward op's gradients")

    @staticmethod
    def jvp(ctx, t_g, t_x):
        # The tangent of x's gradient for the tangents of grad_out (t_g) and x (t_x).
        raise NotImplementedError("TODO(__op__): the backward op's forward-mode formula")

    @staticmethod
    def vmap(info, in_dims, g, x):
        return slice_by_slice(ops.__op___backward, info, in_dims, g, x)


register("__op__", __Op__)
register("__op___backward", __Op__Backward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    ("`__op__`, `_backward`", "TODO(__op__): the vmap rule", "TODO(__op__): the forward-mode formula"),
]
