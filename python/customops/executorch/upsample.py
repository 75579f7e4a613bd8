"""upsample_bilinear2d -> ``aten.upsample_bilinear2d`` where its coordinate convention is PyTorch's (half_pixel is
align_corners=False, align_corners is True; ExecuTorch's portable kernel and XNNPACK run it), else the Inductor
decomposition's exact index arithmetic (asymmetric: four gathers and their blend)."""

from __future__ import annotations

import torch

from ..inductor import upsample as _inductor

# coordinate_mode -> aten.upsample_bilinear2d's align_corners, for the modes that have one.
_ALIGN_CORNERS = {"half_pixel": False, "align_corners": True}


def upsample_bilinear2d(input: torch.Tensor, output_size, coordinate_mode: str = "half_pixel") -> torch.Tensor:
    if coordinate_mode in _ALIGN_CORNERS and input.dim() == 4:
        return torch.ops.aten.upsample_bilinear2d.vec(input, list(output_size), _ALIGN_CORNERS[coordinate_mode],
                                                      None)
    return _inductor.upsample_bilinear2d(input, output_size, coordinate_mode)


DECOMPOSITIONS = {"upsample_bilinear2d": upsample_bilinear2d}
