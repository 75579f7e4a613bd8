"""conv2d and depthwise_conv2d, and their backward ops.

Batch: images are independent (Shard(0) with a replicated weight); the weight and bias gradients are then
sums over the batch, so each rank's are Partial. Channels, where the maths keeps them apart:
- conv2d, output channels (groups == 1): a replicated input and a weight (and bias) sharded on dim 0 give the
  output sharded on dim 1; backward, the input gradient sums over output channels: Partial.
- conv2d, input channels (groups == 1, no bias): input and weight sharded on their dim 1 give a Partial sum
  (a bias would be added once per rank); backward, the input and weight gradients stay sharded on dim 1.
- conv2d with groups > 1: no channel rule. Each rank would hold whole groups, but would have to run the
  local convolution with groups / mesh size, and a rule cannot change the op's arguments; DTensor gathers.
- depthwise_conv2d: input, weight and bias sharded on the same channels (output channel c*m + t reads input
  channel c, so shards align when the input channels divide evenly over the mesh).
Both are linear in the input: a Partial input with a replicated weight and no bias gives a Partial output.
Spatial shards need halos: not local.
"""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register, tensor_shape

ops = torch.ops.customops
R, P = Replicate(), Partial()


def _with_bias(rule, bias_placement, bias):
    """rule = [output, input, weight placements]; the bias's placement is added where there is a bias."""
    return rule + ([bias_placement] if bias is not None else [])


def _channel_dim(x) -> int:
    # (N, C, H, W), or an unbatched (C, H, W)
    return len(tensor_shape(x)) - 3


def _forward_rules(x, bias):
    """What both convolutions allow: everything replicated, the batch, and (linear) a Partial input."""
    rules = [_with_bias([R, R, R], R, bias)]
    if _channel_dim(x) == 1:
        rules.append(_with_bias([Shard(0), Shard(0), R], R, bias))
    if bias is None:
        rules.append([P, P, R])
    return rules


def _conv2d(mesh_size, x, w, bias=None, stride=None, padding=None, dilation=None, groups=1):
    cd = _channel_dim(x)
    rules = _forward_rules(x, bias)
    if groups == 1:
        rules.append(_with_bias([Shard(cd), R, Shard(0)], Shard(0), bias))
        if bias is None:
            rules.append([P, Shard(cd), Shard(1)])
    return rules


def _grads(mask, gx, gw, gb):
    return [p if wanted else None for p, wanted in zip((gx, gw, gb), mask)]


def _backward_rules(x, mask):
    """Both backward ops: everything replicated, and the batch (the weight and bias gradients sum over it)."""
    rules = [_grads(mask, R, R, R) + [R, R, R]]
    if _channel_dim(x) == 1:
        rules.append(_grads(mask, Shard(0), P, P) + [Shard(0), Shard(0), R])
    return rules


def _conv2d_backward(mesh_size, g, x, w, stride, padding, dilation, groups, mask):
    cd = _channel_dim(x)
    rules = _backward_rules(x, mask)
    if groups == 1:
        rules.append(_grads(mask, P, Shard(0), Shard(0)) + [Shard(cd), R, Shard(0)])
        rules.append(_grads(mask, Shard(cd), Shard(1), R) + [R, Shard(cd), Shard(1)])
    return rules


def _depthwise(mesh_size, x, w, bias=None, *window):
    cd = _channel_dim(x)
    rules = _forward_rules(x, bias)
    if tensor_shape(x)[cd] % mesh_size == 0:
        rules.append(_with_bias([Shard(cd), Shard(cd), Shard(0)], Shard(0), bias))
    return rules


def _depthwise_backward(mesh_size, g, x, w, stride, padding, dilation, mask):
    cd = _channel_dim(x)
    rules = _backward_rules(x, mask)
    if tensor_shape(x)[cd] % mesh_size == 0:
        rules.append(_grads(mask, Shard(cd), Shard(0), Shard(0)) + [Shard(cd), Shard(cd), Shard(0)])
    return rules


def register_all() -> None:
    register(ops.conv2d.default, _conv2d)
    register(ops.conv2d_backward.default, _conv2d_backward)
    register(ops.depthwise_conv2d.default, _depthwise)
    register(ops.depthwise_conv2d_backward.default, _depthwise_backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    (
        "`conv2d`",
        "batch `Shard(0)` with replicated weight; output channels (weight and bias `Shard(0)`, groups 1); "
        "input channels (input and weight `Shard(1)`, no bias) giving `Partial`; `Partial` input without "
        "bias. Grouped: batch only (the local op would need groups / mesh size)",
    ),
    (
        "`depthwise_conv2d`",
        "batch; input, weight and bias sharded on the same channels (channels divisible by the mesh size); "
        "`Partial` input without bias",
    ),
    (
        "conv backwards",
        "batch: input gradient `Shard(0)`, weight and bias gradients `Partial`; channel rules as the "
        "forward's",
    ),
]
