"""The ExecuTorch path of customops.deploy.check: ExecuTorch lowers the exported program (customops.executorch
decomposes the operators into core ATen) twice, with the XNNPACK delegate and with the portable kernels alone, and
its runtime runs both programs in this process. As on the direct TF-Lite path, the lowered module returns each
customops op's result beside the model's outputs; the program kept on request is the model's own (its outputs
only, XNNPACK), the one to deploy.

Buffers the graph mutates (a decoding state) become the program's mutable buffers, initialised with their values at
export (InitializedMutableBufferPass: ExecuTorch otherwise serialises their shape alone) and named in the program
(``emit_mutable_buffer_names``), so that a loaded method starts where the module was, carries the state from call
to call, and gives its final value back (``get_attribute``).
"""

from __future__ import annotations

import warnings
from typing import Dict, List, Optional, Sequence

import torch

from .graph import WithValues, mutated_buffers

INSTALL_HINT = "pip install executorch"
LOWERINGS = ("xnnpack", "portable")
# What a lowered program's graph holds beside its operators: memory planning and views.
_PLUMBING = ("alloc", "getitem", "view", "executorch_call_delegate")


def _require():
    try:
        import executorch.exir.program._program  # noqa: F401  (customops.executorch registers on this import)
    except ImportError as e:
        raise ImportError(f"customops.deploy: runtime='executorch' needs executorch, which is not installed: "
                          f"{INSTALL_HINT}") from e
    from .. import executorch as customops_executorch

    if not customops_executorch.is_registered():
        raise RuntimeError(f"customops.deploy: the customops operators are not registered with ExecuTorch: "
                           f"{customops_executorch.error}")
    if customops_executorch.kernel_library():  # the runtime runs the ops routed to customops' kernels
        customops_executorch.load_kernels()


def lower(exported: torch.export.ExportedProgram, lowering: str = "xnnpack"):
    """The ExecuTorch program (``ExecutorchProgramManager``; ``.buffer`` is the .pte) of ``exported``, its mutated
    buffers initialised with their values in ``exported`` and named (graph.mutated_buffers lists them)."""
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    partitioner = None
    if lowering == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = [XnnpackPartitioner()]
    edge = to_edge_transform_and_lower(exported, partitioner=partitioner)
    edge_program = edge.exported_program()
    mutated = set(mutated_buffers(edge_program))
    # The pass matches placeholder names (b_<fqn>), by substring: the mutated buffers' exact names.
    placeholders = [name for name, fqn in edge_program.graph_signature.inputs_to_buffers.items() if fqn in mutated]
    config = ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(placeholders)] if placeholders else [],
                                     emit_mutable_buffer_names=True)
    with warnings.catch_warnings():  # that mutated buffers start uninitialised unless named: these are named
        warnings.filterwarnings("ignore", "Mutation on a buffer in the model is detected")
        return edge.to_executorch(config)


def operators(program) -> Dict[str, int]:
    """The program's kernels by name (``customops::<op>``: customops' own), and how many delegate calls
    (``xnnpack``) it makes."""
    counts: Dict[str, int] = {}
    for node in program.exported_program().graph.nodes:
        if node.op != "call_function":
            continue
        name = str(getattr(node.target, "__name__", node.target))
        if "executorch_call_delegate" in name:
            name = "xnnpack"
        elif any(p in name for p in _PLUMBING):
            continue
        else:
            name = name.split(".")[0]  # the operator, not its out-variant overload
            if getattr(node.target, "namespace", None) == "customops":  # customops' own kernel
                name = f"customops::{name}"
        counts[name] = counts.get(name, 0) + 1
    return counts


def execute(buffer: bytes, inputs: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Runs the program in ``buffer`` (a .pte's bytes) on ``inputs`` with ExecuTorch's runtime."""
    from executorch.runtime import Runtime

    # The loaded program reads the bytes it was given: they must outlive the run.
    program = Runtime.get().load_program(buffer)
    outputs = list(program.load_method("forward").execute(list(inputs)))
    del program
    return [t.clone() for t in outputs]


def execute_calls(buffer: bytes, calls: Sequence[Sequence[torch.Tensor]], state: Sequence[str] = ()) -> tuple:
    """Runs the program in ``buffer`` once per entry of ``calls`` (each the inputs of one call) on one loaded
    method, which carries its mutable buffers from call to call: (each call's outputs, {name: the final value} of
    the mutable buffers named in ``state``)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)  # reads ``buffer``: it must outlive the calls
    method = program.load_method("forward")
    outputs = [[t.clone() for t in method.execute(list(inputs))] for inputs in calls]
    # By name (emit_mutable_buffer_names); the loaded method's own object has get_attribute, its wrapper not.
    final = {name: method._method.get_attribute(name).clone() for name in state}
    del method, program
    return outputs, final


def run(exported: torch.export.ExportedProgram, calls: Sequence[Sequence[torch.Tensor]], value_nodes: List[str],
        n_outputs: int, keep: Optional[str] = None, instrumented: bool = False) -> dict:
    """Lowers ``exported`` both ways and runs each program over ``calls`` (each the inputs of one call; one loaded
    method runs them in order, its mutable buffers carried from call to call).

    Returns ``{"runs": {lowering: per call, [the model's outputs, then each value node's result]}, "state":
    {lowering: {buffer: its value after the last call}}, "operators": {lowering: {kernel: count}}, "pte": keep}``
    (``state`` names the buffers as ``exported`` does)."""
    _require()
    calls = [[t.detach().cpu() for t in inputs] for inputs in calls]
    extended = torch.export.export(WithValues(exported, value_nodes), tuple(calls[0]))
    runs, state, kernels, kept = {}, {}, {}, None
    for lowering in LOWERINGS:
        program = lower(extended, lowering)
        kernels[lowering] = operators(program)
        names = mutated_buffers(program.exported_program())
        runs[lowering], final = execute_calls(program.buffer, calls, names)
        # WithValues holds the model as its submodule ``module``.
        state[lowering] = {name.removeprefix("module."): value for name, value in final.items()}
        if lowering == "xnnpack" and instrumented:
            kept = program.buffer
    if keep is not None:
        with open(keep, "wb") as f:
            f.write(kept if kept is not None else lower(exported, "xnnpack").buffer)
    expected = n_outputs + len(value_nodes)
    for lowering, per_call in runs.items():
        if any(len(outputs) != expected for outputs in per_call):
            raise RuntimeError(f"customops.deploy: the ExecuTorch program ({lowering}) has "
                               f"{len(per_call[0])} outputs, expected {expected}")
    return {"runs": runs, "state": state, "operators": kernels, "pte": keep}


def route(node: torch.fx.Node) -> str:
    """How programs lowered now run the customops op call ``node`` (of an exported program): customops' kernel, or
    its decomposition; and where XNNPACK's partitioner takes the call as a node of its own, that first."""
    from torch.utils._pytree import tree_map

    from .. import executorch as customops_executorch

    args, kwargs = tree_map(lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a,
                            (node.args, node.kwargs))
    op, overload = node.target._opname, node.target._overloadname
    if overload != "default":  # its own decomposition, or customops' kernel alone (causal_conv1d.update)
        if node.target in customops_executorch.decompositions():
            return "decomposed (core ATen)"
        return f"customops kernel ({op}.{overload}_out)"
    by_route = (f"customops kernel ({op}.out)" if customops_executorch.uses_kernel(op, *args, **kwargs)
                else "decomposed (core ATen)")
    if customops_executorch.xnnpack_takes(op, *args, **kwargs):
        return f"XNNPACK's own node with its delegate, else {by_route}"
    return by_route
