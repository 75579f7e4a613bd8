"""customops ops that ExecuTorch's XNNPACK delegate runs as one of its own nodes.

A family module may define ``XNNPACK`` (op name -> ``XnnpackNode``) for calls that XNNPACK computes exactly with a
node of its own but that no core-ATen operator expresses, e.g. an asymmetric resize: XNNPACK's static resize in
TensorFlow's legacy mode. When ExecuTorch's XNNPACK backend is imported, each entry becomes

- a partitioner config, which ``XnnpackPartitioner()`` takes with its own (it reads the backend's config list when
  it is made): on the calls the entry ``takes`` it keeps the op from being decomposed and puts it in XNNPACK's
  partition; every other call is lowered by its route as before (and without the partitioner, all are);
- a node visitor, which writes the call into the delegate's graph as the entry's node;
- for nodes that compute on NHWC tensors, an entry in the backend's channels-last pass, which converts around
  them as it does around XNNPACK's convolutions and resizes.

These are the backend's extension points (its configs, visitors and the pass's operator sets); where they moved
in an ExecuTorch release, registration logs a warning and the calls keep their routes.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from typing import Any, Callable, Dict

import torch

from .._import_hook import when_imported

_log = logging.getLogger("customops.executorch")

_CONFIGS = "executorch.backends.xnnpack.partition.config"
_VISITORS = "executorch.backends.xnnpack.operators.node_visitor"
_CHANNELS_LAST = "executorch.backends.xnnpack._passes.channels_last_tagged_reshape_pass"


@dataclasses.dataclass(frozen=True)
class XnnpackNode:
    """takes(*args, **kwargs): whether XNNPACK runs this call (the op's arguments; fake tensors for tensors).
    node(fx_node, input_id, output_id): the call as the delegate's node (an ``XNN*`` union of ExecuTorch's XNNPACK
    graph schema) on the tensors of those ids. nhwc: the node computes on NHWC tensors."""

    takes: Callable[..., bool]
    node: Callable[[torch.fx.Node, int, int], Any]
    nhwc: bool = True


def entries() -> Dict[str, XnnpackNode]:
    from . import families

    return {op: entry for family in families() for op, entry in getattr(family, "XNNPACK", {}).items()}


def _qualified(op: str) -> str:
    return f"customops.{op}.default"


def _is_call_of(node: torch.fx.Node, op: str) -> bool:
    # An ATen-level node's target prints as customops.<op>.default, an edge-dialect node's names itself so.
    return node.op == "call_function" and _qualified(op) in (str(node.target), getattr(node.target, "__name__", ""))


def _takes(entry: XnnpackNode, node: torch.fx.Node) -> bool:
    if any("val" not in a.meta for a in node.all_input_nodes):
        return False

    def value(a):
        return a.meta["val"] if isinstance(a, torch.fx.Node) else a

    return bool(entry.takes(*[value(a) for a in node.args], **{k: value(v) for k, v in node.kwargs.items()}))


# The ops whose visitor, and where their node computes on NHWC the channels-last pass's entry, are in place: the
# partitioner claims no call the delegate could not then write.
_ready: Dict[str, set] = {"visitor": set(), "nhwc": set()}


def _ready_for(op: str, entry: XnnpackNode) -> bool:
    try:
        for module in (_VISITORS, _CHANNELS_LAST):  # imported by the delegate only after partitioning
            importlib.import_module(module)
    except ImportError:  # moved in this ExecuTorch release: the op keeps its route
        return False
    return op in _ready["visitor"] and (not entry.nhwc or op in _ready["nhwc"])


def _add_configs(module) -> None:
    from executorch.backends.xnnpack.partition.config.generic_node_configs import GenericNodePartitionerConfig
    from executorch.backends.xnnpack.partition.config.xnnpack_config import ConfigPrecisionType

    for op, entry in entries().items():
        def check_constraints(self, node, ep, op=op, entry=entry):
            # The backend finds configs by the op's name without its namespace: aten's op of the same name comes
            # here too.
            return (_is_call_of(node, op) and _ready_for(op, entry) and self.check_common_constraints(node, ep)
                    and _takes(entry, node))

        config = type(f"Customops_{op}_Config", (GenericNodePartitionerConfig,), {
            "target_name": f"{op}.default",
            "check_constraints": check_constraints,
            "supported_precision_types": lambda self: [ConfigPrecisionType.FP32],
            "get_original_aten": lambda self, op=op: getattr(torch.ops.customops, op).default,
        })
        if not any(c.__name__ == config.__name__ for c in module.ALL_PARTITIONER_CONFIGS):
            module.ALL_PARTITIONER_CONFIGS.append(config)


def _add_visitors(module) -> None:
    from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import XNode
    from executorch.backends.xnnpack.utils.utils import get_input_node

    for op, entry in entries().items():
        def define_node(self, node, xnn_graph, vals_to_ids, debug_handle, entry=entry):
            self.define_tensor(node, xnn_graph, vals_to_ids, True)
            self.define_tensor(get_input_node(node, 0), xnn_graph, vals_to_ids, True)
            union = entry.node(node, vals_to_ids[get_input_node(node, 0)], vals_to_ids[node])
            xnn_graph.xnodes.append(XNode(xnode_union=union, debug_handle=debug_handle))

        module.register_node_visitor(type(f"Customops_{op}_Visitor", (module.NodeVisitor,), {
            "target": _qualified(op), "define_node": define_node}))
        _ready["visitor"].add(op)


def _add_channels_last(module) -> None:
    from executorch.exir.dialects._ops import ops as exir_ops

    for op, entry in entries().items():
        if entry.nhwc:
            nhwc_ops = module.ChannelsLastTaggedReshapePass.memory_sensitive_ops_nhwc
            nhwc_ops.add(getattr(exir_ops.edge.customops, op).default)
            _ready["nhwc"].add(op)


def _guarded(register: Callable) -> Callable:
    def run(module) -> None:
        try:
            register(module)
        except Exception as e:  # importing ExecuTorch must not fail because of customops
            _log.warning("customops.executorch: XNNPACK's delegate was not told of customops' ops (%s: %s); they "
                         "keep their routes", type(e).__name__, e)

    return run


def install() -> None:
    """Registers the families' XNNPACK nodes when ExecuTorch's XNNPACK backend is imported (now, if it is)."""
    for module, register in ((_CHANNELS_LAST, _add_channels_last), (_VISITORS, _add_visitors),
                             (_CONFIGS, _add_configs)):
        when_imported(module, _guarded(register))
