"""__op__(a, b) and its backward: TODO(__op__): which placements each rank computes alone, and why."""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, register

ops = torch.ops.customops
R, P = Replicate(), Partial()


def _forward(mesh_size, a, b):
    # Rules, each [result, a, b]: [R, R, R] always holds; Shard(d) (._rules.Shard) where the op treats the
    # slices along d apart; [P, P, R] where it is linear in a (and [P, R, P] in b).
    raise NotImplementedError("TODO(__op__): the forward's placements")


def _backward(mesh_size, grad_out, a, b, mask):
    # Rules, each [a's gradient, b's gradient, grad_out, a, b], None for a gradient mask leaves out.
    raise NotImplementedError("TODO(__op__): the backward's placements")


def register_all() -> None:
    register(ops.__op__.default, _forward)
    register(ops.__op___backward.default, _backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    ("`__op__`", "TODO(__op__): the placements computed locally"),
]
