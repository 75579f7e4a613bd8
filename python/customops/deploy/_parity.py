"""customops.deploy.check: export a model, run it in ONNX Runtime, and report
the parity with eager PyTorch per customops op and per output."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from .report import Flag, OpParity, ParityReport

# im2col results from this size up are flagged (flags.gather_flags).
GATHER_LIMIT_BYTES = 16 << 20


def _require():
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as e:
        from ..onnx import INSTALL_HINT

        raise ImportError(f"customops.deploy needs {e.name}, which is not installed: {INSTALL_HINT}") from e
    from .. import onnx as customops_onnx

    customops_onnx.register()
    return onnxruntime


def check(model, args: Any = (), kwargs: Optional[Dict[str, Any]] = None, *, dynamic_shapes=None,
          atol: float = 1e-4, providers: Optional[Sequence[str]] = None,
          gather_limit_bytes: int = GATHER_LIMIT_BYTES) -> ParityReport:
    """Exports ``model`` with ``torch.onnx.export(..., dynamo=True)``, runs the
    ONNX model in ONNX Runtime on ``args``, and compares with eager PyTorch.

    Args:
        model: an ``nn.Module`` (put it in eval mode first) or a
            ``torch.export.ExportedProgram``.
        args, kwargs: example inputs (a tensor or a tuple of them, as
            torch.onnx.export takes them); the comparison runs on them.
        dynamic_shapes: passed on to torch.onnx.export.
        atol: largest absolute difference accepted; larger ones are flagged
            as ``mismatch`` and make ``report.ok`` False.
        providers: ONNX Runtime execution providers; by default CUDA's for a
            model on CUDA where ONNX Runtime has it, else CPU's.
        gather_limit_bytes: im2col results from this size up are flagged.

    Returns:
        A :class:`ParityReport`: per customops op call (in graph order) the
        largest difference of its result, the same per model output, and the
        flags. ``str(report)`` is the table the command line prints;
        ``report.onnx_program.save(path)`` writes the checked model.
    """
    ort = _require()
    from . import flags as flag_rules
    from . import graph as onnx_graph

    args = args if isinstance(args, tuple) else (args,)
    kwargs = kwargs or {}
    eager = model.module() if isinstance(model, torch.export.ExportedProgram) else model
    with torch.no_grad():
        expected = [t for t in pytree.tree_leaves(eager(*args, **kwargs)) if isinstance(t, torch.Tensor)]
    program = torch.onnx.export(model, args, kwargs=kwargs, dynamo=True, dynamic_shapes=dynamic_shapes,
                                verbose=False)
    exported = program.exported_program
    fx_nodes = {n.name: n for n in exported.graph.nodes}
    ops = [n for n in exported.graph.nodes if onnx_graph.is_op_of(n, "customops")]
    inputs = [a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    intermediates = _eager_intermediates(exported, inputs, {n.name for n in ops})

    proto = program.model_proto
    groups = onnx_graph.nodes_by_fx_node(proto.graph)
    values = {n.name: onnx_graph.result_value(proto.graph, groups.get(n.name, [])) for n in ops}
    provider = _provider(ort, providers, inputs)
    results = _run(ort, program, [v for v in values.values() if v], inputs, provider)

    report = ParityReport(atol=atol, provider=provider, onnx_program=program,
                          opset=next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")))
    for i, (want, got) in enumerate(zip(expected, results["outputs"])):
        report.outputs.append(_max_abs_diff(want, got))
        if report.outputs[-1] > atol:
            report.flags.append(Flag("model", "mismatch", f"output[{i}] differs by {report.outputs[-1]:.2e}"))
    for node in ops:
        got = results["values"].get(values[node.name])
        diff = None if got is None else _max_abs_diff(intermediates[node.name], got)
        parity = OpParity(node.name, f"customops.{node.target._opname}", onnx_graph.module_path(node),
                          onnx_graph.describe(groups.get(node.name, [])), tuple(intermediates[node.name].shape), diff)
        report.ops.append(parity)
        if diff is not None and diff > atol:
            report.flags.append(Flag(node.name, "mismatch", f"{parity.op} differs by {diff:.2e} ({parity.onnx})"))
    report.flags += list(flag_rules.resize_flags(proto.graph, fx_nodes))
    report.flags += list(flag_rules.aten_upsample_flags(exported.graph))
    report.flags += list(flag_rules.gather_flags(exported.graph, gather_limit_bytes))
    return report


def _eager_intermediates(exported: torch.export.ExportedProgram, inputs, names) -> Dict[str, torch.Tensor]:
    """The results of the named nodes, computed by PyTorch on ``inputs`` (the
    customops kernels for customops nodes) through the exported program."""
    recorded: Dict[str, torch.Tensor] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            if n.name in names:
                recorded[n.name] = result
            return result

    with torch.no_grad():
        Recorder(exported.module()).run(*inputs)
    return recorded


def _provider(ort, providers, inputs) -> str:
    available = ort.get_available_providers()
    if providers:
        missing = [p for p in providers if p not in available]
        if missing:
            raise ValueError(f"check: providers {missing} are not available in this onnxruntime ({available})")
        return providers[0]
    on_cuda = any(t.is_cuda for t in inputs)
    return "CUDAExecutionProvider" if on_cuda and "CUDAExecutionProvider" in available else "CPUExecutionProvider"


def _run(ort, program, extra_values, inputs, provider) -> Dict[str, Any]:
    """Runs the exported model with ``extra_values`` (intermediate values) as
    additional graph outputs."""
    import onnx

    proto = onnx.ModelProto()
    proto.CopyFrom(program.model_proto)
    n_outputs = len(proto.graph.output)
    existing = [o.name for o in proto.graph.output]
    added = [v for v in dict.fromkeys(extra_values) if v not in existing]
    # An output needs no type here: ONNX Runtime infers the types of intermediate values.
    proto.graph.output.extend(onnx.ValueInfoProto(name=v) for v in added)
    session = ort.InferenceSession(proto.SerializeToString(), providers=[provider])
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise RuntimeError(f"check: the ONNX model takes {len(names)} inputs, the example has {len(inputs)} tensors")
    feeds = {name: t.detach().cpu().numpy() for name, t in zip(names, inputs)}
    results = session.run(None, feeds)
    by_name = dict(zip(existing + added, results))
    return {"outputs": results[:n_outputs], "values": by_name}


def _max_abs_diff(want: torch.Tensor, got) -> float:
    want = want.detach().cpu()
    got = torch.from_numpy(got).to(want.dtype) if not isinstance(got, torch.Tensor) else got
    if want.shape != got.shape:
        return float("inf")
    if want.numel() == 0:
        return 0.0
    return float((want.double() - got.double()).abs().max())
