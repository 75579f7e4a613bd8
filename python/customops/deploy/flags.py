"""The layers of an exported model whose ONNX semantics differ from PyTorch's,
or will on common runtimes and converters.

What the runtimes do with Resize (docs/deploy.md cites the sources):
- ONNX Runtime and TensorRT implement every coordinate_transformation_mode;
  TensorRT reads pytorch_half_pixel as half_pixel that picks the first pixel
  for a size-1 output.
- ONNX -> TF-Lite converters map half_pixel, align_corners and asymmetric to
  RESIZE_BILINEAR(half_pixel_centers=True), (align_corners=True) and (both
  False), which compute the same coordinates; onnx2tf converts any other mode
  as half_pixel, onnx-tf refuses pytorch_half_pixel. onnx2tf honours the mode
  only up to opset 17: at opset 18 and later every Resize becomes half_pixel.
- A Resize by scales maps coordinates with 1/scale in ONNX, but converters
  resize to floor(in * scale) and map with in/out: different unless in * scale
  is a whole number.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional

import torch

from .graph import attribute, fx_node_name, is_op_of, module_path
from .report import Flag

EXACT_MODES = ("half_pixel", "align_corners", "asymmetric")
# The newest ONNX opset at which onnx2tf keeps a Resize's coordinate mode.
ONNX2TF_OPSET = 17


def _where(fx_node: Optional[torch.fx.Node], fallback: str) -> str:
    if fx_node is None:
        return fallback
    module = module_path(fx_node)
    return f"{fx_node.name} ({module})" if module else fx_node.name


def _static_sizes(fx_node: Optional[torch.fx.Node]) -> Optional[List[int]]:
    val = fx_node.meta.get("val") if fx_node is not None else None
    if not isinstance(val, torch.Tensor):
        return None
    sizes = list(val.shape[-2:])
    return [int(s) for s in sizes] if all(isinstance(s, int) for s in sizes) else None


def resize_flags(graph, fx_nodes: Dict[str, torch.fx.Node]) -> Iterable[Flag]:
    for node in graph.node:
        if node.op_type != "Resize":
            continue
        fx_node = fx_nodes.get(fx_node_name(node) or "")
        where = _where(fx_node, node.name)
        mode = attribute(node, "coordinate_transformation_mode", "half_pixel")
        if mode not in EXACT_MODES:
            yield Flag(where, "coordinate_mode",
                       f"Resize with coordinate_transformation_mode={mode}: onnx2tf converts it as half_pixel "
                       "(TF-Lite RESIZE_BILINEAR half_pixel_centers=True) and onnx-tf refuses it; train with "
                       "customops.UpsampleBilinear2d in one of " + ", ".join(EXACT_MODES))
        sizes = _static_sizes(fx_node)
        if mode in ("half_pixel", "pytorch_half_pixel") and sizes is not None and 1 in sizes:
            yield Flag(where, "size_1",
                       f"{mode} Resize to an output of size {sizes}: half_pixel samples the input's centre "
                       "(as PyTorch, ONNX Runtime, TensorRT and TF-Lite's half_pixel_centers do), "
                       "pytorch_half_pixel (TorchScript-based exports, TensorRT's reading of it) its first "
                       "pixel; check the runtime, or use align_corners/asymmetric for a size-1 output")


def onnx2tf_opset_flags(graph, fx_nodes: Dict[str, torch.fx.Node], opset: int) -> Iterable[Flag]:
    """onnx2tf reads a Resize's coordinate_transformation_mode only up to opset 17 and converts every Resize
    of a newer opset as half_pixel (onnx2tf/ops/Resize.py)."""
    if opset <= ONNX2TF_OPSET:
        return
    for node in graph.node:
        mode = attribute(node, "coordinate_transformation_mode", "half_pixel") if node.op_type == "Resize" else None
        if mode in ("align_corners", "asymmetric"):
            yield Flag(_where(fx_nodes.get(fx_node_name(node) or ""), node.name), "onnx2tf_opset",
                       f"{mode} Resize at opset {opset}: onnx2tf converts a Resize of opset 18 or later as "
                       f"half_pixel; for TF-Lite, export with opset_version={ONNX2TF_OPSET} (check with "
                       "customops.deploy.check(..., runtime='tflite'))")


def aten_upsample_flags(fx_graph: torch.fx.Graph) -> Iterable[Flag]:
    for fx_node in fx_graph.nodes:
        if not is_op_of(fx_node, "aten") or "upsample" not in fx_node.target.name():
            continue
        where = _where(fx_node, fx_node.name)
        yield Flag(where, "aten_upsample",
                   f"{fx_node.target.name()} (F.interpolate or an nn.Upsample that customops.convert did not "
                   "convert) is exported with PyTorch's convention, not a coordinate_mode chosen for the "
                   "runtime; use customops.UpsampleBilinear2d / customops.convert(model, coordinate_mode=...)")
        scale_flag = _scales_flag(fx_node, where)
        if scale_flag is not None:
            yield scale_flag


def _scales_flag(fx_node: torch.fx.Node, where: str) -> Optional[Flag]:
    """aten upsample .vec overloads: (input, output_size, [align_corners,] scale_factors)."""
    scales = fx_node.args[-1] if fx_node.args else None
    source = fx_node.args[0] if fx_node.args else None
    if not isinstance(scales, (list, tuple)) or not isinstance(source, torch.fx.Node):
        return None
    val = source.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    sizes = val.shape[-len(scales):]
    ragged = [(int(n), s) for n, s in zip(sizes, scales)
              if isinstance(n, int) and not math.isclose(n * s, round(n * s))]
    if not ragged:
        return None
    return Flag(where, "scales",
                f"Resize by scale_factor {list(scales)} of sizes {[n for n, _ in ragged]} (not a whole output): "
                "ONNX maps coordinates with 1/scale, TF-Lite converters resize to floor(in * scale) and map "
                "with in/out; give the output size instead")


def gather_flags(fx_graph: torch.fx.Graph, limit_bytes: int) -> Iterable[Flag]:
    for fx_node in fx_graph.nodes:
        if not (is_op_of(fx_node, "customops") and fx_node.target.name() == "customops::im2col"):
            continue
        val = fx_node.meta.get("val")
        if not isinstance(val, torch.Tensor) or not all(isinstance(s, int) for s in val.shape):
            continue
        size = val.numel() * val.element_size()
        if size >= limit_bytes:
            kh, kw = fx_node.args[1]
            yield Flag(_where(fx_node, fx_node.name), "large_gather",
                       f"im2col exports as Pad + Gather, which materialises its {tuple(val.shape)} result "
                       f"({size / 2**20:.1f} MiB, {kh * kw}x the image) on every runtime; where a matmul "
                       "follows, a Conv (customops.Conv2d) exports to one fused node")
