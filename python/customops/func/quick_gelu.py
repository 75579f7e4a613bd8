"""torch.func support of quick_gelu and quick_gelu_backward (elementwise, so
vmap calls the op on the batched tensor as it is)."""

from __future__ import annotations

import torch

from ..pointwise import TORCH
from ..pointwise import quick_gelu as formulas
from ._common import add, batch_first, below_autograd, ops, register


def _second_derivative(x: torch.Tensor) -> torch.Tensor:
    return formulas.second_derivative(TORCH, x)


class QuickGelu(torch.autograd.Function):
    @staticmethod
    def forward(x):
        with below_autograd():
            return ops.quick_gelu(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.quick_gelu_backward(grad, x)

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return ops.quick_gelu_backward(tangent, x)  # f'(x) * tangent

    @staticmethod
    def vmap(info, in_dims, x):
        return ops.quick_gelu(x), in_dims[0]


class QuickGeluBackward(torch.autograd.Function):
    """grad_out * f'(x): linear in grad_out, and f''(x) gives the rest."""

    @staticmethod
    def forward(grad_out, x):
        with below_autograd():
            return ops.quick_gelu_backward(grad_out, x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        grad_out, x = ctx.saved_tensors
        return ops.quick_gelu_backward(grad, x), grad * grad_out * _second_derivative(x)

    @staticmethod
    def jvp(ctx, t_grad_out, t_x):
        grad_out, x = ctx.saved_tensors
        out = None if t_grad_out is None else ops.quick_gelu_backward(t_grad_out, x)
        return add(out, None if t_x is None else t_x * grad_out * _second_derivative(x))

    @staticmethod
    def vmap(info, in_dims, grad_out, x):
        # The op takes two tensors of one shape: both batched, in the same place.
        grad_out, x = (batch_first(t, d, info.batch_size) for t, d in zip((grad_out, x), in_dims))
        return ops.quick_gelu_backward(grad_out, x), 0


register("quick_gelu", QuickGelu)
register("quick_gelu_backward", QuickGeluBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
# scaffold: its rows of the docs' table | DOC_ROWS = [("`quick_gelu`, `_backward`", "TODO", "TODO")]
DOC_ROWS = [
    (
        "`quick_gelu`, `_backward`",
        "elementwise: the op on the batched tensor",
        "`quick_gelu_backward(t, x)`; backward op: `+ t_x * g * f''(x)`",
    ),
]
# scaffold-end
