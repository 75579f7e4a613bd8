"""im2col / col2im (and their backward ops, each the other): linear, so a Partial input gives a Partial
output. Batched, they work image by image (Shard(0) passes through) and channel by channel: im2col's
column c * kh * kw + t comes from channel c, so channel shards of the image are the column matrix's shards of
dim 1 when every rank holds whole channels, i.e. when the channel count divides evenly over the mesh (a
chunk of C*kh*kw rows of ceil(C*kh*kw / n) would otherwise split a channel's taps). Spatial shards need
halos: not local. Unbatched (C, H, W) tensors shard only their channels."""

from __future__ import annotations

import torch

from ._rules import Partial, Replicate, Shard, register, tensor_shape

ops = torch.ops.customops


def _rules(image_shape, mesh_size: int):
    """Rules for an op between an image of image_shape and its column matrix (either way round)."""
    batched = len(image_shape) == 4
    channel_dim = 1 if batched else 0
    rules = [[Replicate(), Replicate()], [Partial(), Partial()]]
    if batched:
        rules.append([Shard(0), Shard(0)])
    if image_shape[channel_dim] % mesh_size == 0:
        rules.append([Shard(channel_dim), Shard(channel_dim)])
    return rules


def _im2col(mesh_size, x, *window):
    return _rules(tensor_shape(x), mesh_size)


def _col2im(mesh_size, cols, output_size, kernel_size, *window):
    shape = tensor_shape(cols)
    channels = shape[-2] // (kernel_size[0] * kernel_size[1])
    image = (shape[0], channels) if len(shape) == 3 else (channels,)
    return _rules(image + (1, 1), mesh_size)


def _im2col_backward(mesh_size, grad_out, input_size, kernel_size, *window):
    return _col2im(mesh_size, grad_out, input_size, kernel_size)


def _col2im_backward(mesh_size, grad_out, *window):
    return _rules(tensor_shape(grad_out), mesh_size)


def register_all() -> None:
    register(ops.im2col.default, _im2col)
    register(ops.col2im.default, _col2im)
    register(ops.im2col_backward.default, _im2col_backward)
    register(ops.col2im_backward.default, _col2im_backward)


# This family's rows of the sharding table in docs/guide/distributed.md, which the docs build reads from here
# (MyST Markdown): the op(s), then the placements computed locally.
DOC_ROWS = [
    (
        "`im2col`, `col2im` (and backwards)",
        "`Shard(0)` (batch); `Shard` on channels when they divide evenly over the mesh; `Partial` in, "
        "`Partial` out",
    ),
]
