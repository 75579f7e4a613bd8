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

from ._common import (batch_first, below_autograd, conv_backward_grads, conv_backward_tangents, conv_tangent,
                      mask_of, ops, register)


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


def _bound_forward(conv: _Conv, params):
    return lambda x, w, b: conv.forward(x, w, b, params)


def _bound_backward(conv: _Conv, params):
    return lambda g, x, w, mask: conv.backward(g, x, w, params, mask)


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
            return conv_tangent(_bound_forward(conv, ctx.params), x, w, tx, tw, tb, ctx.out_shape, 2)

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

        # Bilinear (registration/conv2d.cpp): its gradient and tangent are convolutions and backward ops.
        @staticmethod
        def backward(ctx, ggx, ggw, ggb):
            g, x, w = ctx.saved_tensors
            grads = conv_backward_grads(_bound_forward(conv, ctx.params), _bound_backward(conv, ctx.params),
                                        mask_of(ctx, 3), g, x, w, ggx, ggw, ggb, 2)
            return (*grads, *(None for _ in ctx.params), None)

        @staticmethod
        def jvp(ctx, tg, tx, tw, *_):
            g, x, w = ctx.saved_tensors
            return conv_backward_tangents(_bound_backward(conv, ctx.params), ctx.mask, g, x, w, tg, tx, tw)

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
