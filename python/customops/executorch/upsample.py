"""upsample_bilinear2d -> ``aten.upsample_bilinear2d``, which ExecuTorch's portable kernel and XNNPACK run: with
align_corners=False for half_pixel, True for align_corners, and for asymmetric with True on the input padded by its
last row and column (the same coordinates: see below), the padding cut off after. Where the XNNPACK partitioner
lowers the program, an asymmetric resize of float32 is instead XNNPACK's own resize in TensorFlow's legacy mode,
whose coordinates are asymmetric's: no padding, no crop, in the delegate's partition.

customops' kernel (kernels/executorch/upsample.cpp) runs the resizes aten.upsample_bilinear2d has no convention for
(asymmetric) on request (``customops.executorch.set_route("upsample_bilinear2d", "kernel")``): in a segmentation
network lowered with XNNPACK the decomposition, all delegated, was as fast or faster (docs/deploy.md)."""

from __future__ import annotations

import torch

from ..inductor import upsample as _inductor
from ._xnnpack import XnnpackNode

# coordinate_mode -> aten.upsample_bilinear2d's align_corners, for the modes that have one.
_ALIGN_CORNERS = {"half_pixel": False, "align_corners": True}


def upsample_bilinear2d(input: torch.Tensor, output_size, coordinate_mode: str = "half_pixel") -> torch.Tensor:
    if coordinate_mode in _ALIGN_CORNERS and input.dim() == 4:
        return torch.ops.aten.upsample_bilinear2d.vec(input, list(output_size), _ALIGN_CORNERS[coordinate_mode],
                                                      None)
    if coordinate_mode == "asymmetric" and input.dim() == 4:
        # src = o * in / out along each axis, which is align_corners' mapping from out + 1 positions onto in + 1:
        # the input with its last row and column repeated (what asymmetric's clamp reads past the edge), resized
        # with align_corners, then the extra output row and column dropped.
        h, w = output_size
        padded = torch.cat([input, input[:, :, -1:]], 2)
        padded = torch.cat([padded, padded[:, :, :, -1:]], 3)
        y = torch.ops.aten.upsample_bilinear2d.vec(padded, [h + 1, w + 1], True, None)
        return y[:, :, :h, :w]
    return _inductor.upsample_bilinear2d(input, output_size, coordinate_mode)


DECOMPOSITIONS = {"upsample_bilinear2d": upsample_bilinear2d}


def uses_kernel(input: torch.Tensor, output_size, coordinate_mode: str = "half_pixel") -> bool:
    """Whether a call routed to customops' kernel takes it: the resizes without a convention of
    aten.upsample_bilinear2d's own."""
    return not (coordinate_mode in _ALIGN_CORNERS and input.dim() == 4)


KERNELS = {"upsample_bilinear2d": "decomposition"}
# Per call, for the ops of KERNELS: where the predicate is false, the call is decomposed even on the kernel route.
KERNEL_WHEN = {"upsample_bilinear2d": uses_kernel}


def xnnpack_takes(input: torch.Tensor, output_size, coordinate_mode: str = "half_pixel") -> bool:
    """Whether XNNPACK's partitioner takes the call as its own resize: asymmetric, 4-D float32 of static sizes.
    (TensorFlow's legacy mode computes src = o * in / out and clamps the next row and column at the edge, as
    asymmetric does; half_pixel and align_corners calls are decomposed into aten.upsample_bilinear2d, which it
    takes anyway.)"""
    size = [output_size] * 2 if isinstance(output_size, int) else list(output_size)
    return (coordinate_mode == "asymmetric" and input.dim() == 4 and input.dtype == torch.float32
            and all(isinstance(s, int) for s in (*input.shape, *size)))


def _xnnpack_resize(node, input_id: int, output_id: int):
    from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNNStaticResizeBilinear2D
    from executorch.backends.xnnpack.utils.xnnpack_constants import XNN_FLAG_TENSORFLOW_LEGACY_MODE

    height, width = node.meta["val"].shape[-2:]
    return XNNStaticResizeBilinear2D(new_height=int(height), new_width=int(width), input_id=input_id,
                                     output_id=output_id, flags=XNN_FLAG_TENSORFLOW_LEGACY_MODE)


XNNPACK = {"upsample_bilinear2d": XnnpackNode(xnnpack_takes, _xnnpack_resize)}
