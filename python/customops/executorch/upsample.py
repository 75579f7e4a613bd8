"""upsample_bilinear2d -> ``aten.upsample_bilinear2d``, which ExecuTorch's portable kernel and XNNPACK run: with
align_corners=False for half_pixel, True for align_corners, and for asymmetric with True on the input padded by its
last row and column (the same coordinates: see below), the padding cut off after.

customops' kernel (kernels/executorch/upsample.cpp) runs the resizes aten.upsample_bilinear2d has no convention for
(asymmetric) on request (``customops.executorch.set_route("upsample_bilinear2d", "kernel")``): in a segmentation
network lowered with XNNPACK the decomposition, all delegated, was as fast or faster (docs/deploy.md)."""

from __future__ import annotations

import torch

from ..inductor import upsample as _inductor

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
