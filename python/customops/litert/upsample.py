"""upsample_bilinear2d -> one TF-Lite RESIZE_BILINEAR with the flags of its coordinate mode.

No ATen resize has the ``asymmetric`` convention, and litert-torch's own bilinear resize (a composite of
aten.upsample_bilinear2d) derives half_pixel_centers from align_corners, so the op gets a lowering of its
own: the TF-Lite operator itself, which litert-torch's converter takes from a StableHLO custom call named
after it (the carrier litert-torch uses for TF-Lite operators). RESIZE_BILINEAR is NHWC: the lowering
transposes around it, and the layout pass is told that the op prefers NHWC, as aten's resizes do, so that
those transposes meet and cancel the ones around neighbouring convolutions.
"""

from __future__ import annotations

import numpy as np
import torch

# customops coordinate_mode -> RESIZE_BILINEAR (align_corners, half_pixel_centers).
RESIZE_FLAGS = {"half_pixel": (False, True), "align_corners": (True, False), "asymmetric": (False, False)}

DECOMPOSITIONS: dict = {}


def _lowering(lctx, x, output_size, coordinate_mode="half_pixel"):
    from litert_torch.backend.lowerings import utils

    ir, stablehlo = utils.ir, utils.stablehlo
    if coordinate_mode not in RESIZE_FLAGS:
        raise ValueError(f"customops::upsample_bilinear2d: unknown coordinate_mode {coordinate_mode!r}; "
                         f"expected one of {', '.join(RESIZE_FLAGS)}")
    align_corners, half_pixel_centers = RESIZE_FLAGS[coordinate_mode]
    (result_type,) = utils.node_meta_to_ir_types(lctx.node)
    n, c, out_h, out_w = result_type.shape
    nhwc = ir.RankedTensorType.get([n, out_h, out_w, c], result_type.element_type)
    size = utils.numpy_array_constant(np.array([int(s) for s in output_size], dtype=np.int32))
    flags = ir.DictAttr.get({"align_corners": ir.BoolAttr.get(align_corners),
                             "half_pixel_centers": ir.BoolAttr.get(half_pixel_centers)})
    resized = stablehlo.custom_call(result=[nhwc], inputs=[stablehlo.transpose(x, [0, 2, 3, 1]), size],
                                    call_target_name=ir.StringAttr.get("tfl.resize_bilinear"),
                                    has_side_effect=ir.BoolAttr.get(False),
                                    backend_config=ir.StringAttr.get(str(flags)))
    return stablehlo.transpose(resized, [0, 3, 1, 2])


def register() -> None:
    from litert_torch.backend.lowerings import registry

    op = torch.ops.customops.upsample_bilinear2d.default
    registry.lower(op)(_lowering)
    try:
        from litert_torch._convert.fx_passes.optimize_layout_transposes_pass import layout_check, layout_rewrite
    except ImportError:  # only the transposes around each resize stay
        return

    def nhwc_capable(node):
        four_d = layout_check.all_layout_sensitive_inputs_are_4d(node)
        return layout_check.NHWCable(four_d, must_be=four_d)

    layout_check.nhwcable_node_checkers.register(op)(nhwc_capable)
    layout_check.layout_sensitive_inputs_getters.register(op)(lambda node: [node.args[0]])
    layout_rewrite.rewriters.register(op)(layout_rewrite.transpose_first_arg_rewriter)
