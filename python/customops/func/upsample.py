"""torch.func support of upsample_bilinear2d and its backward: two linear maps,
each the other's adjoint. vmap folds the vmapped dimension into N."""

from __future__ import annotations

from ._common import linear_function, ops, register

UpsampleBilinear2d = linear_function(
    "UpsampleBilinear2d", ops.upsample_bilinear2d,
    lambda g, shape, size, mode: ops.upsample_bilinear2d_backward(g, list(shape[-2:]), mode), 4, False)
UpsampleBilinear2dBackward = linear_function(
    "UpsampleBilinear2dBackward", ops.upsample_bilinear2d_backward,
    lambda g, shape, size, mode: ops.upsample_bilinear2d(g, list(shape[-2:]), mode), 4, False)

register("upsample_bilinear2d", UpsampleBilinear2d)
register("upsample_bilinear2d_backward", UpsampleBilinear2dBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    (
        "`upsample_bilinear2d`, `_backward`",
        "folded into N",
        "linear: the op itself on the tangent",
    ),
]
