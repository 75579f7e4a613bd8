"""Reading an exported ONNX graph back against the exported program it came
from: which ONNX nodes each FX node became (the exporter records the FX node
in each ONNX node's metadata), and what they compute."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Dict, List, Optional, Sequence

import torch

# The exporter writes the FX node it translated into each ONNX node's metadata.
FX_NODE_KEY = "pkg.torch.onnx.fx_node"
_FX_NODE_NAME = re.compile(r"^%(\S+)\s*:")

# Nodes that only move shapes and constants around: left out of a node's summary.
_PLUMBING = {"Constant", "Shape", "Concat", "Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity", "Slice",
             "Transpose", "Pad"}


def fx_node_name(node) -> Optional[str]:
    """The FX node an ONNX NodeProto was translated from, if recorded."""
    for prop in node.metadata_props:
        if prop.key == FX_NODE_KEY:
            match = _FX_NODE_NAME.match(prop.value)
            return match.group(1) if match else None
    return None


def nodes_by_fx_node(graph) -> Dict[str, list]:
    groups: Dict[str, list] = defaultdict(list)
    for node in graph.node:
        name = fx_node_name(node)
        if name is not None:
            groups[name].append(node)
    return groups


def result_value(graph, nodes: list) -> Optional[str]:
    """The value a group of ONNX nodes (one FX node's translation) hands on:
    the one of their outputs read outside the group or returned by the graph.
    None if there is not exactly one (the optimizer merged or removed it)."""
    inside = {id(n) for n in nodes}
    produced = {out for n in nodes for out in n.output if out}
    used_outside = {i for n in graph.node if id(n) not in inside for i in n.input}
    used_outside |= {o.name for o in graph.output}
    candidates = [v for v in produced if v in used_outside]
    return candidates[0] if len(candidates) == 1 else None


def attribute(node, name: str, default=None):
    import onnx  # here, not at import: the litert-torch path of customops.deploy needs no onnx

    for a in node.attribute:
        if a.name == name:
            value = onnx.helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def describe(nodes: list) -> str:
    """A short account of a translation: its computing nodes, with the
    attributes that carry the semantics (Conv's group, Resize's modes)."""
    parts: List[str] = []
    for node in nodes:
        if node.op_type in _PLUMBING:
            continue
        if node.op_type == "Conv":
            text = f"Conv(group={attribute(node, 'group', 1)})"
        elif node.op_type == "Resize":
            text = (f"Resize({attribute(node, 'mode', 'nearest')}, "
                    f"{attribute(node, 'coordinate_transformation_mode', 'half_pixel')})")
        else:
            text = node.op_type
        if not parts or parts[-1] != text:
            parts.append(text)
    return "+".join(parts) if parts else "-"


def module_path(fx_node: torch.fx.Node) -> str:
    """Qualified name of the innermost module whose forward made the call."""
    stack = fx_node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return re.sub(r"^L\['self'\]\.?", "", str(path))


def is_op_of(fx_node: torch.fx.Node, namespace: str) -> bool:
    target = fx_node.target
    return fx_node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and \
        target.namespace == namespace


def mutated_buffers(exported: torch.export.ExportedProgram) -> List[str]:
    """The fully qualified names of the buffers a functional exported program's graph updates in place (its state
    between calls; ONNX's and litert-torch's export drop the updates, ExecuTorch keeps them as mutable buffers)."""
    return sorted(set(exported.graph_signature.buffers_to_mutate.values()))


def run_recording(module: torch.nn.Module, inputs, names) -> tuple:
    """Runs the graph module on ``inputs``: (its outputs, {name: result} of the nodes named in ``names``)."""
    recorded: Dict[str, torch.Tensor] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if n.name in names:
                recorded[n.name] = result
            return result

    return Recorder(module).run(*inputs), recorded


class WithValues(torch.nn.Module):
    """The exported program's module, returning its outputs and then the values of the named nodes."""

    def __init__(self, exported: torch.export.ExportedProgram, names: Sequence[str]) -> None:
        super().__init__()
        self.module = exported.module()
        self.names = list(names)

    def forward(self, *inputs):
        outputs, recorded = run_recording(self.module, inputs, set(self.names))
        outputs = [t for t in torch.utils._pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]
        return tuple(outputs) + tuple(recorded[n] for n in self.names)
