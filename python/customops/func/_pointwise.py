"""torch.func support of a pointwise family, made from its formulas (customops.pointwise): elementwise, so vmap
calls the op on the batched tensors as they are (the vmapped dimensions first, alike); the forward-mode formula of
the op is its backward op applied to the tangents; the backward op, grad_i = g * df/dxi, is differentiated with the
family's second derivatives. The op's scalar arguments (after its tensors) ride along: saved on the context, passed
to the backward op, no gradient nor tangent nor batch dimension of their own."""

from __future__ import annotations

from types import ModuleType
from typing import Optional, Sequence

import torch

from .._families import short_name, synthesized
from ..pointwise import TORCH, args_of
from ._common import add, batch_first, below_autograd, ops, register


def _is_zero(value) -> bool:
    return isinstance(value, (int, float)) and value == 0


def _scaled(factor, weight: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """weight * factor, None for a zero factor or a missing weight."""
    return None if weight is None or _is_zero(factor) else weight * factor


def _batched(info, in_dims: Sequence[Optional[int]], tensors):
    return [batch_first(t, d, info.batch_size) for t, d in zip(tensors, in_dims)]


def family(formulas: ModuleType) -> ModuleType:
    name, n, k = short_name(formulas), len(formulas.INPUTS), len(args_of(formulas))
    op, backward_op = getattr(ops, name), getattr(ops, f"{name}_backward")
    no_grads = (None,) * k  # for the scalar arguments

    def grads(*args) -> tuple:
        out = backward_op(*args)
        return (out,) if n == 1 else tuple(out)

    def op_forward(*xs):
        with below_autograd():
            return op(*xs)

    def save_all(ctx, inputs, output):
        tensors, ctx.args = inputs[:len(inputs) - k], tuple(inputs[len(inputs) - k:])
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)

    def op_backward(ctx, grad):
        out = backward_op(grad, *ctx.saved_tensors, *ctx.args)
        return (*((out,) if n == 1 else out), *no_grads) if k else out

    def op_jvp(ctx, *tangents):
        xs = ctx.saved_tensors
        total = None
        for i, t in enumerate(tangents[:n]):
            if t is not None:
                total = add(total, grads(t, *xs, *ctx.args)[i])
        return total

    def op_vmap(info, in_dims, *xs):
        tensors, args = xs[:n], xs[n:]
        if n == 1:
            return op(*tensors, *args), in_dims[0]
        return op(*_batched(info, in_dims[:n], tensors), *args), 0

    def backward_forward(grad_out, *xs):
        with below_autograd():
            return backward_op(grad_out, *xs)

    def backward_backward(ctx, *gg):
        grad_out, *xs = ctx.saved_tensors
        d = formulas.derivatives(TORCH, *xs, *ctx.args)
        h = formulas.second_derivatives(TORCH, *xs, *ctx.args)
        d_grad_out, d_x = None, [None] * n
        for i in range(n):
            d_grad_out = add(d_grad_out, _scaled(d[i], gg[i]))
            for j in range(n):
                d_x[j] = add(d_x[j], _scaled(h[i][j], gg[i]))
        return (d_grad_out, *(None if t is None else t * grad_out for t in d_x), *no_grads)

    def backward_jvp(ctx, t_grad_out, *t_xs):
        grad_out, *xs = ctx.saved_tensors
        h = formulas.second_derivatives(TORCH, *xs, *ctx.args)
        out = list(grads(t_grad_out, *xs, *ctx.args)) if t_grad_out is not None else [None] * n
        for i in range(n):
            for j in range(n):
                out[i] = add(out[i], _scaled(h[i][j], None if t_xs[j] is None else t_xs[j] * grad_out))
        return out[0] if n == 1 else tuple(out)

    def backward_vmap(info, in_dims, *tensors):
        args = tensors[n + 1:]
        out = backward_op(*_batched(info, in_dims[:n + 1], tensors[:n + 1]), *args)
        return out, 0 if n == 1 else (0,) * n

    def function(class_name, **methods):
        return type(class_name, (torch.autograd.Function,), {k: staticmethod(v) for k, v in methods.items()})

    register(name, function(name, forward=op_forward, setup_context=save_all, backward=op_backward, jvp=op_jvp,
                            vmap=op_vmap))
    register(f"{name}_backward", function(f"{name}_backward", forward=backward_forward, setup_context=save_all,
                                          backward=backward_backward, jvp=backward_jvp, vmap=backward_vmap))
    return synthesized(__package__, formulas, DOC_ROWS=[(
        f"`{name}`, `_backward`", "elementwise: the op on the batched tensors",
        f"`{name}_backward` on the tangents; backward op: `+ g * d2f/dxi dxj` on the inputs' tangents")])
