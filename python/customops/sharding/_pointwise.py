"""A pointwise family's sharding rules. Any Shard or Replicate passes through (every input and output sharded
alike); the op is not linear, so a Partial input is summed first. Its backward op, grad_out * df/dxi, is linear in
grad_out: a Partial grad_out with replicated inputs gives Partial gradients."""

from __future__ import annotations

from types import ModuleType

import torch

from .._families import short_name, synthesized
from ._rules import Partial, Replicate, Shard, register, tensor_shape


def _alike(placement, count):
    return [placement] * count


def family(formulas: ModuleType) -> ModuleType:
    name, n = short_name(formulas), len(formulas.INPUTS)

    def forward(mesh_size, *xs):
        ndim = len(tensor_shape(xs[0]))
        return [_alike(Shard(d), 1 + n) for d in range(ndim)] + [_alike(Replicate(), 1 + n)]

    def backward(mesh_size, grad_out, *xs):
        ndim = len(tensor_shape(grad_out))
        return ([_alike(Shard(d), 2 * n + 1) for d in range(ndim)]
                + [_alike(Partial(), n + 1) + _alike(Replicate(), n), _alike(Replicate(), 2 * n + 1)])

    def register_all() -> None:
        ops = torch.ops.customops
        register(getattr(ops, name).default, forward)
        register(getattr(ops, f"{name}_backward").default, backward)

    return synthesized(__package__, formulas, register_all=register_all, DOC_ROWS=[
        (f"`{name}`", "any `Shard(d)`; backward also `Partial` grad_out with replicated inputs")])
