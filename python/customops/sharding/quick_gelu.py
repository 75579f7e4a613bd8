"""quick_gelu: pointwise. Any Shard or Replicate passes through; it is not linear, so a Partial input is
summed first. Its backward, grad_out * f'(x), is linear in grad_out: a Partial grad_out with a replicated x
gives a Partial gradient."""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register, tensor_shape

ops = torch.ops.customops


def _forward(mesh_size, x):
    ndim = len(tensor_shape(x))
    return [[Shard(d), Shard(d)] for d in range(ndim)] + [[Replicate(), Replicate()]]


def _backward(mesh_size, grad_out, x):
    ndim = len(tensor_shape(x))
    return ([[Shard(d), Shard(d), Shard(d)] for d in range(ndim)]
            + [[Partial(), Partial(), Replicate()], [Replicate(), Replicate(), Replicate()]])


def register_all() -> None:
    register(ops.quick_gelu.default, _forward)
    register(ops.quick_gelu_backward.default, _backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
# scaffold: its rows of the docs' table | DOC_ROWS = [("`quick_gelu`", "TODO")]
DOC_ROWS = [
    (
        "`quick_gelu`",
        "any `Shard(d)`; backward also `Partial` grad_out with replicated x",
    ),
]
# scaffold-end
