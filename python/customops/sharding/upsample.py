"""upsample_bilinear2d and its backward: each (image, channel) plane is resized alone, so Shard(0) and Shard(1)
pass through; the resize is linear, so a Partial input gives a Partial output. Spatial shards would need
the neighbouring rows: not local."""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register

ops = torch.ops.customops


def _planewise(mesh_size, x, *args):
    return [[Replicate(), Replicate()], [Partial(), Partial()], [Shard(0), Shard(0)], [Shard(1), Shard(1)]]


def register_all() -> None:
    register(ops.upsample_bilinear2d.default, _planewise)
    register(ops.upsample_bilinear2d_backward.default, _planewise)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    (
        "`upsample_bilinear2d` (and backward)",
        "`Shard(0)`, `Shard(1)`; `Partial` in, `Partial` out",
    ),
]
