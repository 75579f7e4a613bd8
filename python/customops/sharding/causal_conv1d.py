"""causal_conv1d(x (B, C, L), weight (C, K), bias (C)) and its backward.

Sequences are independent: x sharded on B with a replicated filter gives the output sharded on B, and the
weight and bias gradients, sums over B, are Partial. Channels are independent too: x sharded on C with the
filters and bias sharded on their C gives the output and every gradient sharded on C. The op is linear in x
and in the weight: a Partial one of them (the other replicated, no bias) gives a Partial output, and a Partial
grad_out Partial gradients. Time shards would need the K-1 steps before each shard: not local.
"""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register

ops = torch.ops.customops
R, P = Replicate(), Partial()


def _forward(mesh_size, x, weight, bias=None):
    def rule(out, x_, w_, b_):
        return [out, x_, w_] + ([b_] if bias is not None else [])

    rules = [rule(R, R, R, R), rule(Shard(0), Shard(0), R, R), rule(Shard(1), Shard(1), Shard(0), Shard(0))]
    if bias is None:
        rules += [[P, P, R], [P, R, P]]
    return rules


def _backward(mesh_size, g, x, weight, mask):
    def grads(gx, gw, gb):
        return [p if wanted else None for p, wanted in zip((gx, gw, gb), mask)]

    return [grads(R, R, R) + [R, R, R], grads(Shard(0), P, P) + [Shard(0), Shard(0), R],
            grads(Shard(1), Shard(0), Shard(0)) + [Shard(1), Shard(1), Shard(0)], grads(P, P, P) + [P, R, R]]


def register_all() -> None:
    register(ops.causal_conv1d.default, _forward)
    register(ops.causal_conv1d_backward.default, _backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    (
        "`causal_conv1d` (and backward)",
        "batch `Shard(0)` with replicated filters (weight and bias gradients `Partial`); channels: x `Shard(1)` "
        "with weight and bias `Shard(0)`; `Partial` x or weight without bias",
    ),
]
