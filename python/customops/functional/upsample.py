"""customops.upsample_bilinear2d, with F.interpolate's arguments."""

from __future__ import annotations

import math
from typing import List, Optional

import torch
from torch import Tensor
from torch._jit_internal import BroadcastingList2

from ._common import _check_args, _int_pair, _overview

__all__ = ["upsample_bilinear2d"]


@_overview("bilinear resize of `(N, C, H, W)` by any ratio, in the coordinate conventions of ONNX Resize: "
           "`half_pixel` (= `F.interpolate(align_corners=False)`, TF2 `tf.image.resize`), `align_corners`, "
           "and `asymmetric` (= TF1 `resize_bilinear`, which PyTorch lacks); also takes `F.interpolate`'s "
           "keywords; a deterministic backward (gathers, no atomics), allowed under "
           "`torch.use_deterministic_algorithms(True)`",
           layouts=("native",
                    "native",
                    "the input's (the input gradient follows the output gradient's, as in PyTorch)"))
def upsample_bilinear2d(
    input: Tensor,
    output_size: Optional[BroadcastingList2[int]] = None,
    coordinate_mode: Optional[str] = None,
    scale_factor: Optional[BroadcastingList2[float]] = None,
    size: Optional[BroadcastingList2[int]] = None,
    mode: str = "bilinear",
    align_corners: Optional[bool] = None,
    recompute_scale_factor: Optional[bool] = None,
    antialias: bool = False,
) -> Tensor:
    r"""Bilinear resize of an ``(N, C, H, W)`` tensor, up or down by any ratio,
    with the source-coordinate convention of the framework a model must match.
    Also takes the keyword arguments of ``F.interpolate(mode="bilinear")``
    (``size``, ``scale_factor``, ``align_corners``, ``recompute_scale_factor``)
    with its results; positionally, the third argument is ``coordinate_mode``.

    Along each axis, output index ``o`` samples the input at ``src``:

    - ``"half_pixel"``: ``src = (o + 0.5) * in/out - 0.5``, clamped at 0. Equals
      ``F.interpolate(mode="bilinear", align_corners=False)`` and TensorFlow 2's
      ``tf.image.resize`` (``resize_bilinear(half_pixel_centers=True)``).
    - ``"align_corners"``: ``src = o * (in - 1)/(out - 1)``. Equals
      ``align_corners=True`` in PyTorch and TensorFlow.
    - ``"asymmetric"``: ``src = o * in/out``. Equals TensorFlow 1.x
      ``tf.image.resize_bilinear(align_corners=False)``, the legacy default of many
      deployed TF-Lite models; PyTorch has no equivalent.

    ``src`` blends input indices ``floor(src)`` and the next one (both clamped to
    the last index) with weights ``1 - l`` and ``l``, ``l = src - floor(src)``.

    Args:
        input: ``(N, C, H, W)``; float16, bfloat16, float32 or float64, on CPU or
            CUDA. A channels_last input gives a channels_last result.
        output_size: ``(out_h, out_w)``, or an int for both. ``size`` is the same
            argument under ``F.interpolate``'s name.
        coordinate_mode: ``"half_pixel"``, ``"align_corners"`` or ``"asymmetric"``;
            by default ``"align_corners"`` if ``align_corners`` is True, else
            ``"half_pixel"`` (``F.interpolate``'s default).
        scale_factor: instead of ``output_size``: ``out = floor(in * scale_factor)``
            per axis (a float, or a pair). As in ``F.interpolate``, unless
            ``recompute_scale_factor=True`` the half_pixel mapping then uses
            ``1/scale_factor`` in place of ``in/out``; the two differ when ``in *
            scale_factor`` is not a whole number, and the kernels of this op take
            only sizes, so those calls run PyTorch's own bilinear kernel (equal to
            ``F.interpolate``; its CUDA backward is not deterministic). align_corners
            ignores the scale, as in PyTorch; asymmetric (TensorFlow, which has no
            scale factors) uses ``in/out`` and refuses ``recompute_scale_factor=False``
            where the two differ.
        mode: ``"bilinear"`` only (``F.interpolate``'s argument; others raise).
        align_corners: ``F.interpolate``'s flag, an alternative to ``coordinate_mode``.
        recompute_scale_factor: ``True``: the mapping uses ``in/out`` (see scale_factor).
        antialias: ``True`` raises: antialiased downsampling is not implemented.

    Returns:
        ``(N, C, out_h, out_w)``. Differentiable (twice); the backward gathers the
        gradient for each input pixel in a fixed order (no atomics), so it gives
        bit-identical results run to run and runs under
        ``torch.use_deterministic_algorithms(True)``, on CPU and CUDA.
    """
    if not torch.jit.is_scripting():
        _check_args("upsample_bilinear2d", tensors=[("input", input, 0)],
                    optional=[("output_size", output_size), ("size", size)])
    if antialias:
        raise ValueError("upsample_bilinear2d: antialias=True is not supported (no antialiasing filter); "
                         "use torch.nn.functional.interpolate for antialiased resizing")
    if mode != "bilinear":
        raise ValueError("upsample_bilinear2d: mode must be 'bilinear', got '" + mode + "'")
    if size is not None:
        if output_size is not None:
            raise ValueError("upsample_bilinear2d: give output_size or size (its F.interpolate name), not both")
        output_size = size
    if coordinate_mode is None:
        coordinate_mode = "align_corners" if align_corners is not None and align_corners else "half_pixel"
    elif align_corners is not None and align_corners != (coordinate_mode == "align_corners"):
        raise ValueError("upsample_bilinear2d: coordinate_mode='" + coordinate_mode + "' contradicts align_corners="
                         + str(align_corners))
    if output_size is not None and scale_factor is not None:
        raise ValueError("upsample_bilinear2d: give output_size or scale_factor, not both")
    if output_size is not None:
        if recompute_scale_factor is not None and recompute_scale_factor:
            raise ValueError("upsample_bilinear2d: recompute_scale_factor is not meaningful with an explicit size")
        out_size = _int_pair(output_size)
    elif scale_factor is not None:
        scales = [float(scale_factor), float(scale_factor)] if isinstance(scale_factor, float) else \
            [float(s) for s in scale_factor]
        out_size = [int(math.floor(float(input.shape[-2]) * scales[0])),
                    int(math.floor(float(input.shape[-1]) * scales[1]))]
        if (recompute_scale_factor is None or not recompute_scale_factor) and coordinate_mode != "align_corners" \
                and not _scale_is_ratio(input, scales, out_size):
            # Inputs the op refuses (not 4-D, empty result) go on to it for its message.
            if coordinate_mode == "half_pixel" and input.dim() == 4 and out_size[0] > 0 and out_size[1] > 0:
                return torch.nn.functional.interpolate(input, scale_factor=scales, mode="bilinear",
                                                       align_corners=False, recompute_scale_factor=False)
            if recompute_scale_factor is not None:
                raise ValueError("upsample_bilinear2d: coordinate_mode='asymmetric' maps with in/out; "
                                 "recompute_scale_factor=False asks for 1/scale_factor, which differs here "
                                 "(in * scale_factor is not a whole number)")
    else:
        raise ValueError("upsample_bilinear2d: give output_size or scale_factor")
    return torch.ops.customops.upsample_bilinear2d(input, out_size, coordinate_mode)


def _scale_is_ratio(input: Tensor, scales: List[float], out_size: List[int]) -> bool:
    """Whether 1/scale equals in/out on both axes (in * scale whole). A whole
    scale is checked without the sizes, so that symbolic sizes under
    torch.compile(dynamic=True) add no guard."""
    for i in range(2):
        s = scales[i]
        if s != float(math.floor(s)) and float(input.shape[i - 2]) * s != float(out_size[i]):
            return False
    return True
