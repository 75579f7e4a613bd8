"""torch.func support of __op__ and its backward: TODO(__op__): the family's rules in a paragraph."""

from __future__ import annotations

import torch

from ._common import below_autograd, mask_of, ops, register, slice_by_slice


class __Op__(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        with below_autograd():
            return ops.__op__(a, b)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return ops.__op___backward(grad, a, b, mask_of(ctx, 2))

    @staticmethod
    def jvp(ctx, t_a, t_b):
        # The result's tangent for the tangents of a and b (None where an input has none): for an op linear in
        # each, the op of (t_a, b) plus the op of (a, t_b).
        raise NotImplementedError("TODO(__op__): the forward-mode formula")

    @staticmethod
    def vmap(info, in_dims, a, b):
        # Right for any op; an op with a batch dimension of its own makes one call (_common.fold_into_batch).
        return slice_by_slice(ops.__op__, info, in_dims, a, b)


class __Op__Backward(torch.autograd.Function):
    @staticmethod
    def forward(g, a, b, mask):
        with below_autograd():
            return ops.__op___backward(g, a, b, mask)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mask = inputs[3]
        ctx.save_for_backward(*inputs[:3])
        ctx.save_for_forward(*inputs[:3])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        # The gradients of grad_out, a and b (and None for the mask) for the upstream gradients of the two
        # gradients (None where there is none), as registration/__op__.cpp computes them (the double backward).
        raise NotImplementedError("TODO(__op__): the backward op's gradients")

    @staticmethod
    def jvp(ctx, t_g, t_a, t_b, _):
        # The tangents of the gradients ctx.mask asks for (None for the others).
        raise NotImplementedError("TODO(__op__): the backward op's forward-mode formula")

    @staticmethod
    def vmap(info, in_dims, g, a, b, mask):
        return slice_by_slice(ops.__op___backward, info, in_dims, g, a, b, mask)


register("__op__", __Op__)
register("__op___backward", __Op__Backward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    ("`__op__`, `_backward`", "TODO(__op__): the vmap rule", "TODO(__op__): the forward-mode formula"),
]
