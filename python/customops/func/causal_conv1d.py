"""torch.func support of causal_conv1d and its backward.

The op is linear in each of x, weight and bias, so its tangent is the op again; its backward op is bilinear, so
that op's gradient and tangent are the op and the backward op (registration/causal_conv1d.cpp). vmap: with one
filter for the whole vmapped batch, the vmapped dimension joins B; per-sample filters (and the backward op's
weight gradient, which sums over B) put it into the channels instead, each sample's channels with their own
filters, in one call.
"""

from __future__ import annotations

import torch

from ._common import add, batch_first, below_autograd, mask_of, ops, register


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
        out = None if tx is None else ops.causal_conv1d(tx, weight, tb)
        out = add(out, None if tw is None else ops.causal_conv1d(x, tw, None if tx is not None else tb))
        return out if out is not None else tb.view(1, -1, 1).expand(x.shape)  # only the bias moves

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

    # (gx, gw, gb) = (Gx(g, w), Gw(g, x), sum(g)); for upstream gradients ggx, ggw, ggb:
    #   d g = filter(ggx, w) + filter(x, ggw) + ggb,  d x = Gx(g, ggw),  d w = Gw(g, ggx).
    @staticmethod
    def backward(ctx, ggx, ggw, ggb):
        g, x, weight = ctx.saved_tensors
        need_g, need_x, need_w = mask_of(ctx, 3)
        dg = dx = dw = None
        if need_g:
            if ggx is not None:
                dg = ops.causal_conv1d(ggx, weight, ggb)
            elif ggb is not None:
                dg = ggb.view(1, -1, 1).expand(g.shape)
            dg = add(dg, None if ggw is None else ops.causal_conv1d(x, ggw, None))
        if need_x and ggw is not None:
            dx = ops.causal_conv1d_backward(g, x, ggw, [True, False, False])[0]
        if need_w and ggx is not None:
            dw = ops.causal_conv1d_backward(g, ggx, weight, [False, True, False])[1]
        return dg, dx, dw, None

    # Bilinear: t(gx) = Gx(tg, w) + Gx(g, tw), t(gw) = Gw(tg, x) + Gw(g, tx), t(gb) = sum(tg).
    @staticmethod
    def jvp(ctx, tg, tx, tw, _):
        g, x, weight = ctx.saved_tensors
        mask = list(ctx.mask)
        tgx, tgw, tgb = ops.causal_conv1d_backward(tg, x, weight, mask) if tg is not None else (None, None, None)
        if mask[0] and tw is not None:
            tgx = add(tgx, ops.causal_conv1d_backward(g, x, tw, [True, False, False])[0])
        if mask[1] and tx is not None:
            tgw = add(tgw, ops.causal_conv1d_backward(g, tx, weight, [False, True, False])[1])
        # A gradient the mask asks for whose inputs have no tangent does not move.
        zeros = (torch.zeros_like(x), torch.zeros_like(weight), g.new_zeros(weight.shape[0]))
        return tuple(None if not m else (t if t is not None else z) for m, t, z in zip(mask, (tgx, tgw, tgb), zeros))

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
