"""torch.func support of im2col, col2im and their backward ops: four linear
maps, each the adjoint of another (im2col/col2im_backward unfold,
col2im/im2col_backward fold). vmap folds the vmapped dimension into the
op's batch dimension."""

from __future__ import annotations

from ._common import linear_function, ops, register


def _hw(shape):
    return list(shape[-2:])


# linear_function(name, op, adjoint(g, input shape, *params), batched rank, takes unbatched)
Im2col = linear_function(
    "Im2col", ops.im2col,
    lambda g, shape, k, d, p, s: ops.im2col_backward(g, _hw(shape), k, d, p, s), 4, True)
Im2colBackward = linear_function(
    "Im2colBackward", ops.im2col_backward,
    lambda g, shape, size, k, d, p, s: ops.col2im_backward(g, k, d, p, s), 3, True)
Col2im = linear_function(
    "Col2im", ops.col2im,
    lambda g, shape, size, k, d, p, s: ops.col2im_backward(g, k, d, p, s), 3, True)
Col2imBackward = linear_function(
    "Col2imBackward", ops.col2im_backward,
    lambda g, shape, k, d, p, s: ops.im2col_backward(g, _hw(shape), k, d, p, s), 4, True)

register("im2col", Im2col)
register("im2col_backward", Im2colBackward)
register("col2im", Col2im)
register("col2im_backward", Col2imBackward)


# This family's rows of the torch.func table in docs/guide/func.md, which the docs build reads from here
# (MyST Markdown): the op(s), the vmap rule, the forward-mode formula.
DOC_ROWS = [
    (
        "`im2col`, `col2im`, their backward ops",
        "vmapped dimension folded into N",
        "linear: the op itself on the tangent",
    ),
]
