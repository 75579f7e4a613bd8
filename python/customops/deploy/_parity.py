"""customops.deploy.check: export a model, run it in ONNX Runtime or as a
TF-Lite model in the LiteRT interpreter, and report the parity with eager
PyTorch per customops op and per output."""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
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


RUNTIMES = ("onnxruntime", "tflite", "executorch")
CONVERTERS = ("onnx2tf", "litert-torch")


def check(model, args: Any = (), kwargs: Optional[Dict[str, Any]] = None, *, runtime: str = "onnxruntime",
          dynamic_shapes=None, atol: float = 1e-4, providers: Optional[Sequence[str]] = None,
          gather_limit_bytes: int = GATHER_LIMIT_BYTES, converter: str = "onnx2tf",
          tflite_python: Optional[str] = None,
          tflite_resolvers: Optional[Sequence[str]] = None, save_tflite: Optional[str] = None,
          int8_calibration: Any = None, save_pte: Optional[str] = None,
          save_instrumented: bool = False, calls: Optional[Sequence[Any]] = None) -> ParityReport:
    """Exports ``model`` with ``torch.onnx.export(..., dynamo=True)``, runs the
    ONNX model in ONNX Runtime (or converts it to TF-Lite with onnx2tf and runs
    it in the LiteRT interpreter) on ``args``, and compares with eager PyTorch.

    Args:
        model: an ``nn.Module`` (put it in eval mode first) or a
            ``torch.export.ExportedProgram``.
        args, kwargs: example inputs (a tensor or a tuple of them, as
            torch.onnx.export takes them); the comparison runs on them.
            Eager PyTorch runs on a copy of the model: the check leaves a
            model with state (buffers its forward updates in place) as it was.
        calls: with ``runtime="executorch"``, for a model with state (a
            decoding step that updates a cache buffer in place): the inputs of
            successive calls, each a tensor or a tuple as ``args`` (of their
            shapes; ``kwargs`` go with every call). The model is exported once,
            on ``args``; the buffers its graph mutates become the program's
            mutable buffers, starting from the model's values at the check.
            Eager PyTorch runs the calls in order on a copy of the model, and
            ExecuTorch's runtime on one loaded method, which carries the state
            from call to call. Every output and op is compared at each call
            (the report keeps the largest difference and its call:
            ``report.output_calls``, ``OpParity.call``), and each mutated
            buffer after the last call (``report.state``). Without ``calls``,
            the one call on ``args``, from the model's current state. ONNX
            Runtime and TF-Lite models as this check exports them keep no
            state: a model that updates buffers is reported unsupported there.
        runtime: ``"onnxruntime"``, ``"executorch"`` (``torch.export``, lowered by ExecuTorch with the
            XNNPACK delegate and with its portable kernels alone, both run by its runtime; every difference
            is the larger of the two), or ``"tflite"``: the model is exported at
            ONNX opset 17, converted by onnx2tf (in the environment of
            ``python -m customops.deploy.tflite_env``) and run with each of
            LiteRT's kernel options (XNNPACK, builtin, reference); every
            difference is the largest over them, and the converted model's
            operators are checked (one RESIZE_BILINEAR with the flags of each
            resize's coordinate mode, DEPTHWISE_CONV_2D for depthwise layers,
            no Flex or custom ops).
        converter: with ``runtime="tflite"``, ``"onnx2tf"`` (through ONNX)
            or ``"litert-torch"`` (PyTorch -> TF-Lite directly; needs
            litert-torch in this environment, which takes torch 2.4-2.14, and
            no onnx).
        dynamic_shapes: passed on to torch.onnx.export.
        atol: largest absolute difference accepted; larger ones are flagged
            as ``mismatch`` and make ``report.ok`` False.
        providers: ONNX Runtime execution providers; by default CUDA's for a
            model on CUDA where ONNX Runtime has it, else CPU's.
        gather_limit_bytes: im2col results from this size up are flagged.
        tflite_python: the Python of the TF-Lite environment
            (customops.deploy.tflite_env says where it is looked for).
        tflite_resolvers: LiteRT kernel options to run (default: all three).
        save_tflite: a path to write the model's .tflite at: its own outputs only (converted again without the
            ops' values the check compares), the model to deploy.
        save_pte: with ``runtime="executorch"``, a path to write the model's ExecuTorch program at (XNNPACK).
        save_instrumented: save the checked model instead, which returns each customops op's result after the
            model's outputs (the .tflite or .pte; for debugging a runtime, not for deployment).
        int8_calibration: with ``runtime="tflite"``, representative inputs
            (a batch, or a tuple of batches, one per model input): a
            full-integer (int8) model is converted with them as well and run
            on ``args``; its largest output difference, relative to each
            output's range, is reported (``report.int8_outputs``), not held
            to ``atol``.

    Returns:
        A :class:`ParityReport`: per customops op call (in graph order) the
        largest difference of its result, the same per model output, and the
        flags. ``str(report)`` is the table the command line prints;
        ``report.onnx_program.save(path)`` writes the checked model.
    """
    if runtime not in RUNTIMES:
        raise ValueError(f"check: runtime must be one of {RUNTIMES}, got {runtime!r}")
    if converter not in CONVERTERS:
        raise ValueError(f"check: converter must be one of {CONVERTERS}, got {converter!r}")
    executorch = runtime == "executorch"
    # No ONNX on these paths: the exported program goes to the converter itself.
    direct = executorch or (runtime == "tflite" and converter == "litert-torch")
    if runtime == "tflite" and dynamic_shapes is not None:
        raise ValueError("check: runtime='tflite' converts a model of static shapes (TF-Lite models have fixed "
                         "input shapes); leave dynamic_shapes out")
    if executorch and dynamic_shapes is not None:
        raise ValueError("check: runtime='executorch' checks the program of the example inputs' shapes; leave "
                         "dynamic_shapes out")
    if int8_calibration is not None and (runtime != "tflite" or direct):
        raise ValueError("check: int8_calibration is for runtime='tflite' with converter='onnx2tf' (onnx2tf "
                         "quantizes with a representative dataset; litert-torch quantizes through its own PT2E "
                         "flow)")
    if calls is not None and not executorch:
        raise ValueError("check: calls is for runtime='executorch', whose programs keep a model's buffers from call "
                         "to call")
    from . import graph as fx_graph

    args = args if isinstance(args, tuple) else (args,)
    kwargs = kwargs or {}
    calls = [args] if calls is None else [c if isinstance(c, tuple) else (c,) for c in calls]
    if not calls:
        raise ValueError("check: calls is empty")
    eager = model.module() if isinstance(model, torch.export.ExportedProgram) else model
    # The export below takes the model's buffers as they are, and the model stays as the caller left it: eager
    # runs on a copy, or, for a model that cannot be copied, on the model with its buffers put back afterwards.
    eager, saved = _eager_copy(eager)
    with torch.no_grad():
        expected_calls = [[t for t in pytree.tree_leaves(eager(*c, **kwargs)) if isinstance(t, torch.Tensor)]
                          for c in calls]
        final_buffers = {name: b.detach().clone() for name, b in eager.named_buffers()}
        for name, buffer in eager.named_buffers() if saved is not None else ():
            buffer.copy_(saved[name])
    expected = expected_calls[0]
    program = None
    if direct:  # no ONNX on this path
        exported = model if isinstance(model, torch.export.ExportedProgram) else torch.export.export(
            model, args, kwargs)
    else:
        ort = _require()
        from ..onnx import tflite_friendly

        with tflite_friendly() if runtime == "tflite" else contextlib.nullcontext():
            program = torch.onnx.export(model, args, kwargs=kwargs, dynamo=True, dynamic_shapes=dynamic_shapes,
                                        verbose=False)
        exported = program.exported_program
    if not executorch:
        mutated = fx_graph.mutated_buffers(exported if program is not None else exported.run_decompositions({}))
        if mutated:
            report = ParityReport(atol=atol, runtime=runtime, converter=converter if runtime == "tflite" else "",
                                  onnx_program=program, provider="not run")
            report.flags.append(Flag("model", "unsupported", (
                f"the model updates buffers in place ({', '.join(mutated)}), which the {runtime} model as exported "
                "here drops (no state between calls); check it with runtime='executorch', or make the state an "
                "input and its next value an output")))
            return report
    ops = [n for n in exported.graph.nodes if fx_graph.is_op_of(n, "customops")]
    call_inputs = [[a for a in pytree.tree_leaves((c, kwargs)) if isinstance(a, torch.Tensor)] for c in calls]
    inputs = call_inputs[0]
    intermediate_calls = _eager_intermediates(exported, call_inputs, {n.name for n in ops})

    if runtime == "tflite":
        from . import tflite

        resolvers = tuple(tflite_resolvers or tflite.RESOLVERS)
        report = ParityReport(atol=atol, runtime="tflite", converter=converter, onnx_program=program,
                              provider="LiteRT: " + ", ".join(resolvers),
                              opset=0 if direct else tflite.ONNX2TF_OPSET)
        reason = tflite.unsupported(inputs, ops, converter)
        if reason:
            report.flags.append(Flag("model", "unsupported", reason))
            return report
    if executorch:
        from . import pte

        converted = pte.run(exported, call_inputs, [n.name for n in ops], len(expected), keep=save_pte,
                            instrumented=save_instrumented)
        names = [f"output[{i}]" for i in range(len(expected))] + [n.name for n in ops]
        values = {n.name: n.name for n in ops}
        describe = {n.name: pte.route(n) for n in ops}
        layout = None
        report = ParityReport(atol=atol, runtime="executorch", provider="ExecuTorch: " + ", ".join(pte.LOWERINGS),
                              calls=len(calls))
        report.pte_path, report.pte_operators = converted["pte"], converted["operators"]
    elif direct:
        from . import tflite_direct

        converted = tflite_direct.run(exported, inputs, [n.name for n in ops], len(expected), resolvers,
                                      keep=save_tflite, instrumented=save_instrumented)
        names = [f"output[{i}]" for i in range(len(expected))] + [n.name for n in ops]
        values = {n.name: n.name for n in ops}
        describe = {n.name: "-" for n in ops}
        layout = tflite.as_shaped  # litert-torch keeps PyTorch's layout
    else:
        proto = program.model_proto
        groups = fx_graph.nodes_by_fx_node(proto.graph)
        values = {n.name: fx_graph.result_value(proto.graph, groups.get(n.name, [])) for n in ops}
        describe = {n.name: fx_graph.describe(groups.get(n.name, [])) for n in ops}
        if runtime == "tflite":
            proto = tflite.for_onnx2tf(proto)
            extended, names = _with_outputs(proto, [v for v in values.values() if v])
            converted = tflite.run(extended, inputs, names, python=tflite_python,
                                   keep=save_tflite if save_instrumented else None, resolvers=resolvers)
            if save_tflite and not save_instrumented:  # the deployable model: its own outputs only
                tflite.run(_own_outputs(proto, len(expected)), inputs, names[:len(expected)],
                           python=tflite_python, keep=save_tflite, resolvers=("AUTO",))
                converted["tflite"] = save_tflite
            layout = tflite.from_layout
        else:
            extended, names = _with_outputs(proto, [v for v in values.values() if v])
            provider = _provider(ort, providers, inputs)
            converted = {"runs": {provider: _run(ort, extended, inputs, provider)}}
            report = ParityReport(atol=atol, provider=provider, onnx_program=program,
                                  opset=next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")))
            layout = None
    if runtime == "tflite":
        report.tflite_path = converted["tflite"] if save_tflite else None
        report.tflite_operators = converted["operators"]
    # Per call, each run's results by name (ExecuTorch's runs hold one list of outputs per call).
    runs = converted["runs"].values()
    results = ([[dict(zip(names, per_call[c])) for per_call in runs] for c in range(len(calls))] if executorch
               else [[dict(zip(names, outputs)) for outputs in runs]])
    at = (lambda c: f" at call {c}") if len(calls) > 1 else (lambda c: "")

    def worst(wants: List[torch.Tensor], name: str) -> Tuple[Optional[float], int]:
        """The largest difference over the runs and the calls (NaN first), and its call; None where not found."""
        found = [(_max_abs_diff(want, r[name], layout), c) for c, (want, per_call) in enumerate(zip(wants, results))
                 for r in per_call if name in r]
        if not found:
            return None, 0
        return max(found, key=lambda dc: (math.isnan(dc[0]), dc[0]))

    for i in range(len(expected)):
        diff, call = worst([e[i] for e in expected_calls], names[i])
        report.outputs.append(diff)
        report.output_calls.append(call)
        if not diff <= atol:
            report.flags.append(Flag("model", "mismatch", f"output[{i}] differs by {diff:.2e}{at(call)}"))
    for node in ops:
        want = [i[node.name] for i in intermediate_calls]
        diff, call = worst(want, values[node.name]) if values[node.name] else (None, 0)
        parity = OpParity(node.name, _op_name(node.target), fx_graph.module_path(node),
                          describe[node.name], tuple(want[0].shape), diff, call)
        report.ops.append(parity)
        if diff is not None and not diff <= atol:
            report.flags.append(Flag(node.name, "mismatch",
                                     f"{parity.op} differs by {diff:.2e}{at(call)} ({parity.onnx})"))
    for lowering, final in converted.get("state", {}).items():
        for name, got in final.items():
            diff = _max_abs_diff(final_buffers[name], got)
            report.state[name] = max(report.state.get(name, 0.0), diff, key=lambda d: (math.isnan(d), d))
    for name, diff in report.state.items():
        if not diff <= atol:
            report.flags.append(Flag("model", "mismatch", f"buffer {name} after the last call differs by {diff:.2e}"))
    report.flags += list(_flags(exported, program, ops, runtime, direct, gather_limit_bytes, report))
    if runtime == "tflite" and int8_calibration is not None:
        report.int8_outputs = _int8_errors(tflite, extended, inputs, expected, int8_calibration, tflite_python)
    return report


def _eager_copy(model):
    """A deep copy of ``model`` and None; or, where it cannot be copied (a tensor autograd made, held as an
    attribute), the model itself and its buffers' values to put back."""
    try:
        return copy.deepcopy(model), None
    except Exception:  # noqa: BLE001  (deepcopy's errors are as many as the objects a model can hold)
        return model, {name: b.detach().clone() for name, b in model.named_buffers()}


def _flags(exported, program, ops, runtime: str, direct: bool, gather_limit_bytes: int, report):
    from . import flags as flag_rules

    yield from flag_rules.aten_upsample_flags(exported.graph)
    if not direct:  # the flags of the ONNX graph
        fx_nodes = {n.name: n for n in exported.graph.nodes}
        proto = program.model_proto
        yield from flag_rules.resize_flags(proto.graph, fx_nodes)
        yield from flag_rules.gather_flags(exported.graph, gather_limit_bytes)
        if runtime == "onnxruntime":
            yield from flag_rules.onnx2tf_opset_flags(proto.graph, fx_nodes, report.opset)
    if runtime == "tflite":
        from . import tflite

        yield from tflite.operator_flags(report.tflite_operators, ops)


def _int8_errors(tflite, proto, inputs, expected, calibration, python) -> List[float]:
    """Per output: the full-integer model's largest difference from eager PyTorch over the output's range."""
    calibration = calibration if isinstance(calibration, (tuple, list)) else (calibration,)
    names = [o.name for o in proto.graph.output][:len(expected)]
    proto = _own_outputs(proto, len(expected))
    converted = tflite.run(proto, inputs, names, python=python, resolvers=("AUTO",), calibration=calibration)
    errors = []
    for want, got in zip(expected, converted["runs"]["AUTO"]):
        span = float(want.max() - want.min()) if want.numel() else 0.0
        errors.append(_max_abs_diff(want, got, tflite.from_layout) / (span or 1.0))
    return errors


def _own_outputs(proto, n_outputs: int):
    """A copy of the ONNX model with its first ``n_outputs`` outputs only: the op results stay inside."""
    own = type(proto)()
    own.CopyFrom(proto)
    del own.graph.output[n_outputs:]
    return own


def _eager_intermediates(exported: torch.export.ExportedProgram, calls, names) -> List[Dict[str, torch.Tensor]]:
    """Per call (each a list of inputs, run in order), the results of the named
    nodes, computed by PyTorch (the customops kernels for customops nodes)
    through the exported program, on a copy of its state."""
    from .graph import run_recording

    module = copy.deepcopy(exported.module())
    with torch.no_grad():
        return [run_recording(module, inputs, set(names))[1] for inputs in calls]


def _op_name(target) -> str:
    """``customops.<op>``, and ``.<overload>`` for an overload other than the default (``causal_conv1d.update``)."""
    overload = "" if target._overloadname == "default" else f".{target._overloadname}"
    return f"customops.{target._opname}{overload}"


def _provider(ort, providers, inputs) -> str:
    available = ort.get_available_providers()
    if providers:
        missing = [p for p in providers if p not in available]
        if missing:
            raise ValueError(f"check: providers {missing} are not available in this onnxruntime ({available})")
        return providers[0]
    on_cuda = any(t.is_cuda for t in inputs)
    return "CUDAExecutionProvider" if on_cuda and "CUDAExecutionProvider" in available else "CPUExecutionProvider"


def _with_outputs(model_proto, extra_values):
    """A copy of the model with ``extra_values`` (intermediate values) as
    additional graph outputs, and the names of all its outputs."""
    import onnx

    proto = onnx.ModelProto()
    proto.CopyFrom(model_proto)
    existing = [o.name for o in proto.graph.output]
    added = [v for v in dict.fromkeys(extra_values) if v not in existing]
    value_info = {v.name: v for v in proto.graph.value_info}
    # ONNX Runtime infers an output's type; onnx2tf wants it, where the exporter recorded it.
    proto.graph.output.extend(value_info.get(v, onnx.ValueInfoProto(name=v)) for v in added)
    return proto, existing + added


def _run(ort, proto, inputs, provider) -> List[Any]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=[provider])
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(inputs):
        raise RuntimeError(f"check: the ONNX model takes {len(names)} inputs, the example has {len(inputs)} tensors")
    feeds = {name: t.detach().cpu().numpy() for name, t in zip(names, inputs)}
    return session.run(None, feeds)


def _max_abs_diff(want: torch.Tensor, got, layout=None) -> float:
    """``layout``: a function that brings a runtime's result back to PyTorch's layout of a shape."""
    want = want.detach().cpu()
    if layout is not None:
        try:
            got = layout(got, want.shape)
        except ValueError:
            return float("inf")
    got = torch.from_numpy(np.asarray(got)).to(want.dtype) if not isinstance(got, torch.Tensor) else got
    if want.shape != got.shape:
        return float("inf")
    if want.numel() == 0:
        return 0.0
    return float((want.double() - got.double()).abs().max())
