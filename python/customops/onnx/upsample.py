"""upsample_bilinear2d -> Resize(mode="linear") with the op's coordinate mode.

Each customops mode is the ONNX coordinate_transformation_mode of the same
name (kernels/upsample.h writes them out). For half_pixel, ONNX has two modes
that differ only where an output axis has size 1: "half_pixel" samples the
input's centre, (in - 1) / 2, and "pytorch_half_pixel" its first pixel. The
customops kernel, like F.interpolate(align_corners=False), samples the centre,
so the translation uses "half_pixel" (torch's own exporter writes
pytorch_half_pixel for F.interpolate, which differs from eager PyTorch at size
1). Both clamp source coordinates below 0 to the first pixel, as the kernel
does (ONNX by replicating the edge, which gives the same value).
"""

from __future__ import annotations

from ._common import INT64, TFloat, int64_vector, op

# customops coordinate_mode -> ONNX Resize coordinate_transformation_mode
COORDINATE_MODES = {"half_pixel": "half_pixel", "align_corners": "align_corners", "asymmetric": "asymmetric"}


def upsample_bilinear2d(input: TFloat, output_size: INT64, coordinate_mode: str = "half_pixel") -> TFloat:
    if coordinate_mode not in COORDINATE_MODES:
        raise ValueError(f"customops.onnx: unknown coordinate_mode {coordinate_mode!r}; expected one of "
                         f"{', '.join(COORDINATE_MODES)}")
    # Resize takes the full output shape; N and C come from the input, so a dynamic batch stays dynamic.
    sizes = op.Concat(op.Shape(input, start=0, end=2), int64_vector(output_size), axis=0)
    return op.Resize(input, None, None, sizes, mode="linear",
                     coordinate_transformation_mode=COORDINATE_MODES[coordinate_mode])


TRANSLATIONS = {"upsample_bilinear2d": upsample_bilinear2d}


# This family's rows of the ONNX table in docs/deploy.md, which the docs build reads from here (MyST Markdown):
# the op, its translation.
DOC_ROWS = [
    (
        "`upsample_bilinear2d`",
        '`Resize(mode="linear")`, `coordinate_transformation_mode` = the op\'s `coordinate_mode` (`half_pixel`, '
        "`align_corners` or `asymmetric`), output size as `sizes`",
    ),
]
