"""torch.func support of conv2d, depthwise_conv2d and their backward ops.

One set of formulas serves both ops (depthwise is conv2d with groups = C), as
in registration/conv2d.cpp. A convolution is linear in each of input, weight
and bias, so its tangent is convolutions again; its backward op is bilinear,
so the backward op's gradient and tangent are convolutions and backward ops.

vmap: with one weight for the whole vmapped batch, the vmapped dimension joins
N. Per-sample weights (or a weight gradient, which sums over N) instead put
the vmapped dimension into the channels and multiply groups by the batch size,
so that each sample meets its own weight in one call.
"""

from __future__ import annotations

import torch

from ._common import add, batch_first, below_autograd, mask_of, ops, register


class _Conv:
    """Calls of one convolution op with the geometry ``params`` = (stride,
    padding, dilation) plus groups for conv2d; ``groups`` scales the groups
    (vmap's channel trick; depthwise derives them from the input)."""

    def __init__(self, forward, backward, has_groups: bool):
        self.forward_op, self.backward_op, self.has_groups = forward, backward, has_groups

    def forward(self, x, w, b, params, groups=1):
        return self.forward_op(x, w, b, *self._scaled(params, groups))

    def backward(self, g, x, w, params, mask, groups=1):
        return self.backward_op(g, x, w, *self._scaled(params, groups), list(mask))

    def _scaled(self, params, groups):
        if not self.has_groups:
            return params
        return (*params[:3], params[3] * groups)


def _as_grouped(t, unbatched):
    """(B, [N,] C, H, W) -> (N, B*C, H, W): the vmapped batch becomes channel groups."""
    if unbatched:
        t = t.unsqueeze(1)
    return t.movedim(0, 1).flatten(1, 2)


def _from_grouped(t, batch_size, unbatched):
    """(N, B*C, H, W) -> (B, [N,] C, H, W)."""
    t = t.unflatten(1, (batch_size, -1)).movedim(1, 0)
    return t.squeeze(1) if unbatched else t


def _make_functions(conv: _Conv, prefix: str):
    class ConvFunction(torch.autograd.Function):
        @staticmethod
        def forward(x, w, b, *params):
            with below_autograd():
                return conv.forward(x, w, b, params)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w, b = inputs[:3]
            ctx.params, ctx.has_bias, ctx.out_shape = inputs[3:], b is not None, output.shape
            ctx.save_for_backward(x, w)
            ctx.save_for_forward(x, w)

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            mask = mask_of(ctx, 3)
            mask[2] = mask[2] and ctx.has_bias
            gx, gw, gb = conv.backward(grad, x, w, ctx.params, mask)
            return (gx, gw, gb, *(None for _ in ctx.params))

        @staticmethod
        def jvp(ctx, tx, tw, tb, *_):
            x, w = ctx.saved_tensors
            out = None if tx is None else conv.forward(tx, w, tb, ctx.params)
            out = add(out, None if tw is None else conv.forward(x, tw, None if tx is not None else tb, ctx.params))
            return out if out is not None else tb.view(-1, 1, 1).expand(ctx.out_shape)  # only the bias moves

        @staticmethod
        def vmap(info, in_dims, x, w, b, *params):
            xd, wd, bd = in_dims[:3]
            n = info.batch_size
            x = batch_first(x, xd, n)
            unbatched = x.dim() == 4
            if wd is None and bd is None:
                if unbatched:
                    return conv.forward(x, w, b, params), 0
                return conv.forward(x.flatten(0, 1), w, b, params).unflatten(0, (n, -1)), 0
            w, b = batch_first(w, wd, n), batch_first(b, bd, n)
            out = conv.forward(_as_grouped(x, unbatched), w.flatten(0, 1), None if b is None else b.flatten(),
                               params, groups=n)
            return _from_grouped(out, n, unbatched), 0

    class ConvBackwardFunction(torch.autograd.Function):
        # Returns (grad_input, grad_weight, grad_bias), None where output_mask says so.

        @staticmethod
        def forward(g, x, w, *params_and_mask):
            with below_autograd():
                return conv.backward(g, x, w, params_and_mask[:-1], params_and_mask[-1])

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.params, ctx.mask = inputs[3:-1], inputs[-1]
            ctx.save_for_backward(*inputs[:3])
            ctx.save_for_forward(*inputs[:3])
            ctx.set_materialize_grads(False)

        # (gx, gw, gb) = (Gx(g, w), Gw(g, x), sum(g)), Gx and Gw the adjoints of
        # the convolution in x and in w (registration/conv2d.cpp). For upstream
        # gradients ggx, ggw, ggb:
        #   d g = conv(ggx, w) + conv(x, ggw) + ggb,  d x = Gx(g, ggw),  d w = Gw(g, ggx).
        @staticmethod
        def backward(ctx, ggx, ggw, ggb):
            g, x, w = ctx.saved_tensors
            need_g, need_x, need_w = mask_of(ctx, 3)
            dg = dx = dw = None
            if need_g:
                if ggx is not None:
                    dg = conv.forward(ggx, w, ggb, ctx.params)
                elif ggb is not None:
                    dg = ggb.view(-1, 1, 1).expand(g.shape)
                dg = add(dg, None if ggw is None else conv.forward(x, ggw, None, ctx.params))
            if need_x and ggw is not None:
                dx = conv.backward(g, x, ggw, ctx.params, (True, False, False))[0]
            if need_w and ggx is not None:
                dw = conv.backward(g, ggx, w, ctx.params, (False, True, False))[1]
            return (dg, dx, dw, *(None for _ in ctx.params), None)

        # Bilinear: t(gx) = Gx(tg, w) + Gx(g, tw), t(gw) = Gw(tg, x) + Gw(g, tx), t(gb) = sum(tg).
        @staticmethod
        def jvp(ctx, tg, tx, tw, *_):
            g, x, w = ctx.saved_tensors
            mask = list(ctx.mask)
            tgx, tgw, tgb = conv.backward(tg, x, w, ctx.params, mask) if tg is not None else (None, None, None)
            if mask[0] and tw is not None:
                tgx = add(tgx, conv.backward(g, x, tw, ctx.params, (True, False, False))[0])
            if mask[1] and tx is not None:
                tgw = add(tgw, conv.backward(g, tx, w, ctx.params, (False, True, False))[1])
            # A gradient the mask asks for whose inputs have no tangent does not move.
            zeros = (torch.zeros_like(x), torch.zeros_like(w), g.new_zeros(w.shape[0]))
            return tuple(None if not m else (t if t is not None else z)
                         for m, t, z in zip(mask, (tgx, tgw, tgb), zeros))

        @staticmethod
        def vmap(info, in_dims, g, x, w, *params_and_mask):
            params, mask = params_and_mask[:-1], params_and_mask[-1]
            gd, xd, wd = in_dims[:3]
            n = info.batch_size
            g, x = batch_first(g, gd, n), batch_first(x, xd, n)
            unbatched = x.dim() == 4
            if wd is None and not mask[1] and not mask[2] and not unbatched:
                # Only the input gradient, per image: the vmapped batch joins N.
                gx = conv.backward(g.flatten(0, 1), x.flatten(0, 1), w, params, mask)[0]
                return (gx.unflatten(0, (n, -1)), None, None), (0, None, None)
            w = batch_first(w, wd, n)
            gx, gw, gb = conv.backward(_as_grouped(g, unbatched), _as_grouped(x, unbatched), w.flatten(0, 1),
                                       params, mask, groups=n)
            out = (None if gx is None else _from_grouped(gx, n, unbatched),
                   None if gw is None else gw.unflatten(0, (n, -1)),
                   None if gb is None else gb.unflatten(0, (n, -1)))
            return out, tuple(None if t is None else 0 for t in out)

    ConvFunction.__name__ = ConvFunction.__qualname__ = prefix
    ConvBackwardFunction.__name__ = ConvBackwardFunction.__qualname__ = prefix + "Backward"
    return ConvFunction, ConvBackwardFunction


Conv2d, Conv2dBackward = _make_functions(
    _Conv(ops.conv2d, ops.conv2d_backward, has_groups=True), "Conv2d")
DepthwiseConv2d, DepthwiseConv2dBackward = _make_functions(
    _Conv(ops.depthwise_conv2d, ops.depthwise_conv2d_backward, has_groups=False), "DepthwiseConv2d")

register("conv2d", Conv2d)
register("conv2d_backward", Conv2dBackward)
register("depthwise_conv2d", DepthwiseConv2d)
register("depthwise_conv2d_backward", DepthwiseConv2dBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    (
        "`conv2d`, `depthwise_conv2d`, their backward ops",
        "folded into N; per-sample weights (and weight gradients) as channel groups",
        "linear in each argument: `conv(t_x, w) + conv(x, t_w) + t_b`; backward op: bilinear, backward ops of "
        "the tangents",
    ),
]
