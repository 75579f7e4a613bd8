"""The TF-Lite runtime of customops.deploy.check: ONNX -> onnx2tf -> .tflite,
run by the LiteRT interpreter with each of its kernel options.

The conversion runs in the TF-Lite environment's Python (tflite_env), through
tflite_worker.py, on files in a temporary folder. The export is at ONNX opset
17: onnx2tf honours a Resize's coordinate_transformation_mode only up to
opset 17 and converts every Resize of a newer opset as half_pixel
(onnx2tf/ops/Resize.py), which would silently change the align_corners and
asymmetric resizes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import torch

from ..litert.upsample import RESIZE_FLAGS
from . import tflite_env
from .flags import ONNX2TF_OPSET
from .report import Flag
from .tflite_worker import same_but_ones

WORKER = Path(__file__).with_name("tflite_worker.py")
# LiteRT's kernel options (ai_edge_litert.interpreter.OpResolverType): the optimized kernels with the XNNPACK
# delegate (the default), the optimized kernels alone, and the reference kernels.
RESOLVERS = ("AUTO", "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "BUILTIN_REF")

# The ops whose first input is an image (N, C, H, W), or (C, H, W) unbatched.
_IMAGE_OPS = ("conv2d", "depthwise_conv2d", "upsample_bilinear2d", "im2col")
# Ops that mean the model needs more than TF-Lite's builtin kernels.
_FOREIGN = ("CUSTOM", "FLEX")


def for_onnx2tf(proto):
    """The exported model as onnx2tf converts it faithfully, every value keeping its name (so the per-op
    values found in the exported model are found in this one):

    - at opset 17: the exporter writes opset 18 or later (its translations, ours included, are written for
      18), and onnx2tf keeps a Resize's coordinate mode only up to 17; ONNX's version converter takes the
      model down;
    - a Conv with both a stride and a dilation above 1, which TensorFlow's convolutions refuse, becomes the
      Conv at stride 1 and a Slice that keeps every stride-th output: the same values.
    """
    import onnx
    from onnx import version_converter

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    proto = copy
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    if opset > ONNX2TF_OPSET:
        try:
            proto = version_converter.convert_version(proto, ONNX2TF_OPSET)
            _drop_default_attributes(proto.graph)
        except RuntimeError:  # it has no adapter for some ops (Pad, 18 -> 17) even where nothing changes
            proto = _relabelled(proto)
    _split_strided_dilated_convs(proto.graph)
    onnx.checker.check_model(proto)
    return proto


# Opset 18's changes to ops the translations use, and what a node must not use to mean the same at 17.
_OPSET_18_ONLY = {"Pad": lambda n: len(n.input) < 4 or not n.input[3],  # the axes input
                  "Resize": lambda n: not {a.name for a in n.attribute} & {"antialias", "axes",
                                                                           "keep_aspect_ratio_policy"}}


def _drop_default_attributes(graph) -> None:
    """Removes attributes that the version converter leaves on nodes whose opset-17 form lacks them
    (ReduceMean's noop_with_empty_axes), where they hold the opset-18 default and so change nothing."""
    from onnx import defs, helper

    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        old = defs.get_schema(node.op_type, ONNX2TF_OPSET).attributes
        new = defs.get_schema(node.op_type, ONNX2TF_OPSET + 1).attributes
        for attribute in list(node.attribute):
            if attribute.name in old:
                continue
            default = new[attribute.name].default_value if attribute.name in new else None
            if default is None or helper.get_attribute_value(default) != helper.get_attribute_value(attribute):
                raise ValueError(f"customops.deploy: the ONNX {node.op_type} node {node.name!r} uses "
                                 f"{attribute.name}, which opset {ONNX2TF_OPSET} lacks")
            node.attribute.remove(attribute)


def _relabelled(proto):
    """The model (changed in place) declared at opset 17, where every node means the same there."""
    from onnx import defs

    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        since = defs.get_schema(node.op_type, 18).since_version
        same = since <= ONNX2TF_OPSET or (node.op_type in _OPSET_18_ONLY and _OPSET_18_ONLY[node.op_type](node))
        if not same:
            raise ValueError(f"customops.deploy: the ONNX {node.op_type} node {node.name!r} needs opset {since}; "
                             f"onnx2tf keeps resize coordinate modes only up to opset {ONNX2TF_OPSET}")
    for opset in proto.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = ONNX2TF_OPSET
    return proto


def _split_strided_dilated_convs(graph) -> None:
    from onnx import helper, numpy_helper

    nodes = []
    for node in graph.node:
        attrs = {a.name: a for a in node.attribute}
        strides = list(helper.get_attribute_value(attrs["strides"])) if "strides" in attrs else []
        dilations = list(helper.get_attribute_value(attrs["dilations"])) if "dilations" in attrs else []
        if node.op_type != "Conv" or not any(s > 1 for s in strides) or not any(d > 1 for d in dilations):
            nodes.append(node)
            continue
        dense = f"{node.output[0]}__stride1"
        constants = {"starts": [0, 0], "ends": [2**31 - 1] * 2, "axes": [2, 3], "steps": strides}
        for key, values in constants.items():
            graph.initializer.append(numpy_helper.from_array(np.array(values, np.int64), f"{dense}__{key}"))
        attrs["strides"].CopyFrom(helper.make_attribute("strides", [1] * len(strides)))
        output = node.output[0]
        node.output[0] = dense
        nodes += [node, helper.make_node("Slice", [dense] + [f"{dense}__{k}" for k in constants], [output],
                                         name=f"{node.name}__strides")]
    del graph.node[:]
    graph.node.extend(nodes)


def unsupported(inputs: Sequence[torch.Tensor], ops: List[torch.fx.Node], converter: str) -> Optional[str]:
    """Why the model cannot become a TF-Lite model through ``converter``, or None."""
    empty = [tuple(t.shape) for t in inputs if t.numel() == 0]
    if empty:
        return f"TF-Lite tensors cannot be empty; inputs of shapes {empty}"
    if any(n.target._opname == "col2im" for n in ops):
        return ("col2im has no TF-Lite form: through ONNX it is Col2Im, of opset 18, while onnx2tf keeps resize "
                "coordinate modes only up to opset 17; litert-torch makes it a scatter-add, which TF-Lite's "
                "kernels refuse")
    if converter != "onnx2tf":
        return None
    unbatched = sorted({n.target._opname for n in ops if n.target._opname in _IMAGE_OPS
                        and n.args[0].meta["val"].dim() == 3})
    if unbatched:
        return (f"{', '.join(unbatched)} on an unbatched (C, H, W) image: onnx2tf takes a 3-D input for a "
                "batch of 1-D signals; give the model's input a batch dimension")
    return None


def run(proto, inputs: Sequence[torch.Tensor], output_names: List[str], *, python: Optional[str] = None,
        resolvers: Iterable[str] = RESOLVERS, calibration: Optional[Sequence[torch.Tensor]] = None,
        keep: Optional[str] = None) -> dict:
    """Converts the ONNX model ``proto`` (whose graph outputs are
    ``output_names``) and runs it on ``inputs`` with each kernel option.

    Returns ``{"runs": {resolver: [array per output name]}, "operators":
    [...], "tflite": path}``; the arrays are in TF-Lite's layout (channels
    last). With ``calibration`` (a batch of representative inputs per model
    input), the model is a full-integer one. ``keep``: a folder to leave the
    .tflite in (else it is removed with the temporary folder)."""
    import onnx

    env_python = tflite_env.python(python)
    with tempfile.TemporaryDirectory(prefix="customops-tflite-") as workdir:
        model_path = os.path.join(workdir, "model.onnx")
        onnx.save(proto, model_path)
        names = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
        inputs_npz = os.path.join(workdir, "inputs.npz")
        np.savez(inputs_npz, **{name: t.detach().cpu().numpy() for name, t in zip(names, inputs)})
        # onnx2tf takes inputs of rank 3 and more for images (channels first, which it makes channels last);
        # only rank 4 ones are images here: an unbatched image, trilinear's (N, 8, F) features are not.
        keep_shape = [name for name, t in zip(names, inputs) if t.dim() != 4]
        job = {"onnx": model_path, "workdir": workdir, "inputs_npz": inputs_npz, "outputs": output_names,
               "resolvers": list(resolvers), "quantize": None, "keep_shape_inputs": keep_shape}
        if calibration is not None:
            calibration_npz = os.path.join(workdir, "calibration.npz")
            np.savez(calibration_npz, **{name: t.detach().cpu().numpy() for name, t in zip(names, calibration)})
            job["quantize"] = {"calibration_npz": calibration_npz}
        job_path = os.path.join(workdir, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        completed = subprocess.run([env_python, "-I", str(WORKER), job_path], env=env, capture_output=True,
                                   text=True)
        result_path = os.path.join(workdir, "result.json")
        if not os.path.exists(result_path):
            raise RuntimeError(f"customops.deploy: the TF-Lite worker ({env_python}) failed with exit status "
                               f"{completed.returncode}:\n{completed.stderr[-4000:]}")
        with open(result_path) as f:
            result = json.load(f)
        if not result["ok"]:
            raise RuntimeError(f"customops.deploy: converting to TF-Lite with onnx2tf failed: {result['error']}\n"
                               f"{result.get('traceback', '')[-4000:]}")
        runs = {}
        for resolver, path in result["runs"].items():
            with np.load(path) as saved:
                runs[resolver] = [saved[f"o{i}"] for i in range(len(output_names))]
        tflite_path = result["tflite"]
        if keep is not None:
            shutil.copyfile(tflite_path, keep)
            tflite_path = keep
        return {"runs": runs, "operators": result["operators"], "tflite": tflite_path,
                "convert_seconds": result["convert_seconds"]}


def from_layout(array: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """A TF-Lite result back in PyTorch's layout of ``shape``. onnx2tf keeps
    tensors of rank 3 and more channels last; where both layouts have the
    same shape, channels last is taken (onnx2tf's rule)."""
    shape = tuple(int(s) for s in shape)
    if array.ndim >= 3:
        first = np.moveaxis(array, -1, 1)
        if first.shape == shape:
            return first
    if array.shape == shape or same_but_ones(array.shape, shape):  # a 0-d tensor is (1,) in TF-Lite
        return array.reshape(shape)
    raise ValueError(f"a TF-Lite result of shape {array.shape} fits no layout of PyTorch's {shape}")


def as_shaped(array: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """A TF-Lite result in PyTorch's layout already (litert-torch's), where the converter may have added or
    dropped dimensions of size 1."""
    shape = tuple(int(s) for s in shape)
    if array.shape == shape or same_but_ones(array.shape, shape):
        return np.asarray(array).reshape(shape)
    raise ValueError(f"a TF-Lite result of shape {array.shape} is not PyTorch's {shape}")


def operator_flags(operators: List[dict], ops: List[torch.fx.Node]) -> Iterable[Flag]:
    """Checks the converted model's operators against the customops ops it came from."""
    names = [o["op"] for o in operators]
    foreign = sorted({n for n in names if n.startswith(_FOREIGN)})
    if foreign:
        yield Flag("model", "tflite_op",
                   f"the TF-Lite model needs ops outside TF-Lite's builtins: {', '.join(foreign)}")
    resizes = [o for o in operators if o["op"] == "RESIZE_BILINEAR"]
    wanted = [(RESIZE_FLAGS[_mode(n)], n) for n in ops if n.target._opname == "upsample_bilinear2d"]
    found = [(bool(o["options"].get("alignCorners")), bool(o["options"].get("halfPixelCenters"))) for o in resizes]
    for flags, node in wanted:
        if flags in found:
            found.remove(flags)
        else:
            yield Flag(node.name, "tflite_op",
                       f"no RESIZE_BILINEAR(align_corners={flags[0]}, half_pixel_centers={flags[1]}) for this "
                       f"{_mode(node)} resize in the TF-Lite model")
    depthwise = sum(1 for n in ops if n.target._opname == "depthwise_conv2d")
    converted = names.count("DEPTHWISE_CONV_2D")
    if converted < depthwise:
        yield Flag("model", "tflite_op",
                   f"{depthwise} depthwise_conv2d calls but {converted} DEPTHWISE_CONV_2D ops in the TF-Lite model")


def _mode(node: torch.fx.Node) -> str:
    if len(node.args) > 2:
        return node.args[2]
    return node.kwargs.get("coordinate_mode", "half_pixel")


def summary(operators: List[dict]) -> str:
    """'CONV_2D x3, RESIZE_BILINEAR(half_pixel_centers) x1, ...'."""
    counts: Dict[str, int] = {}
    for o in operators:
        name = o["op"]
        if name == "RESIZE_BILINEAR":
            on = [k for k in ("alignCorners", "halfPixelCenters") if o["options"].get(k)]
            name += f"({', '.join(on) or 'asymmetric'})"
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in counts.items())
