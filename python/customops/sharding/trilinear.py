# scaffold: which placements each rank computes alone, and why | """trilinear_interpolation and its backward: TODO(trilinear_interpolation)."""
"""trilinear_interpolation(feats (N, 8, F), points (N, 3)) -> (N, F) and its backward.

Points are independent: feats, points and the output shard together on N. Features are independent too:
feats sharded on F with every point on every rank give the output sharded on F. The output is linear in
feats (not in points): Partial feats with replicated points give a Partial output. Backward: the feats
gradient, w_k * grad_out, follows grad_out (Shard N, Shard F, or Partial with replicated points); the points
gradient sums over features, so under F sharding each rank holds a Partial share of it. Both gradients are
linear in grad_out: a Partial grad_out with replicated feats and points gives Partial gradients."""
# scaffold-end

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register

ops = torch.ops.customops
R, P = Replicate(), Partial()


def _forward(mesh_size, feats, points):
    # scaffold: the forward's placements: [output, *inputs] per rule | raise NotImplementedError("TODO(trilinear_interpolation)")
    return [[R, R, R], [Shard(0), Shard(0), Shard(0)], [Shard(1), Shard(2), R], [P, P, R]]
    # scaffold-end


def _backward(mesh_size, grad_out, feats, points, mask):
    # scaffold: the backward's placements | raise NotImplementedError("TODO(trilinear_interpolation)")
    def grads(gf, gp):
        return [gf if mask[0] else None, gp if mask[1] else None]

    return [grads(R, R) + [R, R, R], grads(Shard(0), Shard(0)) + [Shard(0), Shard(0), Shard(0)],
            grads(Shard(2), P) + [Shard(1), Shard(2), R], grads(P, P) + [P, R, R]]
    # scaffold-end


def register_all() -> None:
    register(ops.trilinear_interpolation.default, _forward)
    register(ops.trilinear_interpolation_backward.default, _backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    (
        # scaffold: its row in the sharding table: the op(s), the placements | "TODO(trilinear_interpolation)", "TODO(trilinear_interpolation)",
        "`trilinear_interpolation`",
        "feats and points `Shard(0)` (N); feats `Shard(2)` (F) with replicated points gives `Shard(1)`; "
        "`Partial` feats; backward: points gradient `Partial` under F sharding",
        # scaffold-end
    ),
]
