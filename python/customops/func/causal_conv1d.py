"""torch.func support of causal_conv1d and its backward.

The op is linear in each of x, weight and bias, so its tangent is the op again; its backward op is bilinear, so
that op's gradient and tangent are the op and the backward op (registration/causal_conv1d.cpp). vmap: with one
filter for the whole vmapped batch, the vmapped dimension joins B; per-sample filters (and the backward op's
weight gradient, which sums over B) put it into the channels instead, each sample's channels with their own
filters, in one call.
"""

from __future__ import annotations

import torch

from ._common import (batch_first, below_autograd, conv_backward_grads, conv_backward_tangents, conv_tangent,
                      mask_of, ops, register)


def _to_channels(t):
    """(n, B, C, L) -> (B, n*C, L): the vmapped batch becomes channels."""
    return t.movedim(0, 1).flatten(1, 2)


def _from_channels(t, n):
    """(B, n*C, L) -> (n, B, C, L)."""
    return t.unflatten(1, (n, -1)).movedim(1, 0)


def _rank_checked(x, *args):
    if x.dim() != 4:  # one sample to the op, which raises its own message for this rank
        ops.causal_conv1d(x[0], *args)
    return x


class CausalConv1d(torch.autograd.Function):
    @staticmethod
    def forward(x, weight, bias):
        with below_autograd():
            return ops.causal_conv1d(x, weight, bias)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, weight, bias = inputs
        ctx.has_bias = bias is not None
        ctx.save_for_backward(x, weight)
        ctx.save_for_forward(x, weight)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        mask = mask_of(ctx, 3)
        mask[2] = mask[2] and ctx.has_bias
        return ops.causal_conv1d_backward(grad, x, weight, mask)

    @staticmethod
    def jvp(ctx, tx, tw, tb):
        x, weight = ctx.saved_tensors
        return conv_tangent(ops.causal_conv1d, x, weight, tx, tw, tb, x.shape, 1)

    @staticmethod
    def vmap(info, in_dims, x, weight, bias):
        n = info.batch_size
        x = _rank_checked(batch_first(x, in_dims[0], n), weight, bias)
        if in_dims[1] is None and in_dims[2] is None:
            return ops.causal_conv1d(x.flatten(0, 1), weight, bias).unflatten(0, (n, -1)), 0
        weight, bias = batch_first(weight, in_dims[1], n), batch_first(bias, in_dims[2], n)
        out = ops.causal_conv1d(_to_channels(x), weight.flatten(0, 1), None if bias is None else bias.flatten())
        return _from_channels(out, n), 0


class CausalConv1dBackward(torch.autograd.Function):
    # (g, x, weight) -> (gx, gw, gb), None where output_mask says so.

    @staticmethod
    def forward(g, x, weight, mask):
        with below_autograd():
            return ops.causal_conv1d_backward(g, x, weight, mask)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.mask = inputs[3]
        ctx.save_for_backward(*inputs[:3])
        ctx.save_for_forward(*inputs[:3])
        ctx.set_materialize_grads(False)

    # Bilinear (registration/causal_conv1d.cpp): its gradient and tangent are the op and the backward op.
    @staticmethod
    def backward(ctx, ggx, ggw, ggb):
        g, x, weight = ctx.saved_tensors
        grads = conv_backward_grads(ops.causal_conv1d, ops.causal_conv1d_backward, mask_of(ctx, 3), g, x, weight,
                                    ggx, ggw, ggb, 1)
        return (*grads, None)

    @staticmethod
    def jvp(ctx, tg, tx, tw, _):
        g, x, weight = ctx.saved_tensors
        return conv_backward_tangents(ops.causal_conv1d_backward, ctx.mask, g, x, weight, tg, tx, tw)

    @staticmethod
    def vmap(info, in_dims, g, x, weight, mask):
        n = info.batch_size
        g, x = batch_first(g, in_dims[0], n), _rank_checked(batch_first(x, in_dims[1], n), weight)
        if in_dims[2] is None and not mask[1] and not mask[2]:
            # Only the input gradient, per sequence: the vmapped batch joins B.
            gx = ops.causal_conv1d_backward(g.flatten(0, 1), x.flatten(0, 1), weight, mask)[0]
            return (gx.unflatten(0, (n, -1)), None, None), (0, None, None)
        weight = batch_first(weight, in_dims[2], n)
        gx, gw, gb = ops.causal_conv1d_backward(_to_channels(g), _to_channels(x), weight.flatten(0, 1), mask)
        out = (None if gx is None else _from_channels(gx, n), None if gw is None else gw.unflatten(0, (n, -1)),
               None if gb is None else gb.unflatten(0, (n, -1)))
        return out, tuple(None if t is None else 0 for t in out)


register("causal_conv1d", CausalConv1d)
register("causal_conv1d_backward", CausalConv1dBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    (
        "`causal_conv1d`, `_backward`",
        "folded into B; per-sample filters (and weight gradients) as channels",
        "linear in each argument: the op on the tangents; backward op: bilinear, backward ops of the tangents",
    ),
]
