"""__op__(x) and its backward: TODO(__op__): which placements each rank computes alone, and why."""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, register

ops = torch.ops.customops
R, P = Replicate(), Partial()


def _forward(mesh_size, x):
    # Rules, each [result, x]: [R, R] always holds; Shard(d) of both (._rules.Shard) where the op treats x's
    # slices along d apart (their dimension in the result where it moves); [P, P] where it is linear in x.
    raise NotImplementedError("TODO(__op__): the forward's placements")


def _backward(mesh_size, grad_out, x):
    # Rules, each [x's gradient, grad_out, x].
    raise NotImplementedError("TODO(__op__): the backward's placements")


def register_all() -> None:
    register(ops.__op__.default, _forward)
    register(ops.__op___backward.default, _backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    ("`__op__`", "TODO(__op__): the placements computed locally"),
]
