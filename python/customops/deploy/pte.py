"""The ExecuTorch path of customops.deploy.check: ExecuTorch lowers the exported program (customops.executorch
decomposes the operators into core ATen) twice, with the XNNPACK delegate and with the portable kernels alone, and
its runtime runs both programs in this process. As on the direct TF-Lite path, the lowered module returns each
customops op's result beside the model's outputs; the program kept on request is the model's own (its outputs
only, XNNPACK), the one to deploy.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch

from .graph import WithValues

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
    """The ExecuTorch program (``ExecutorchProgramManager``; ``.buffer`` is the .pte) of ``exported``."""
    from executorch.exir import to_edge_transform_and_lower

    partitioner = None
    if lowering == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = [XnnpackPartitioner()]
    return to_edge_transform_and_lower(exported, partitioner=partitioner).to_executorch()


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


def run(exported: torch.export.ExportedProgram, inputs: Sequence[torch.Tensor], value_nodes: List[str],
        n_outputs: int, keep: Optional[str] = None, instrumented: bool = False) -> dict:
    """Lowers ``exported`` both ways and runs each program on ``inputs``.

    Returns ``{"runs": {lowering: [the model's outputs, then each value node's result]}, "operators": {lowering:
    {kernel: count}}, "pte": keep}``."""
    _require()
    inputs = [t.detach().cpu() for t in inputs]
    extended = torch.export.export(WithValues(exported, value_nodes), tuple(inputs))
    runs, kernels, kept = {}, {}, None
    for lowering in LOWERINGS:
        program = lower(extended, lowering)
        kernels[lowering] = operators(program)
        runs[lowering] = execute(program.buffer, inputs)
        if lowering == "xnnpack" and instrumented:
            kept = program.buffer
    if keep is not None:
        with open(keep, "wb") as f:
            f.write(kept if kept is not None else lower(exported, "xnnpack").buffer)
    expected = n_outputs + len(value_nodes)
    for lowering, outputs in runs.items():
        if len(outputs) != expected:
            raise RuntimeError(f"customops.deploy: the ExecuTorch program ({lowering}) has {len(outputs)} outputs, "
                               f"expected {expected}")
    return {"runs": runs, "operators": kernels, "pte": keep}


def route(node: torch.fx.Node) -> str:
    """How programs lowered now run the customops op call ``node`` (of an exported program): customops' kernel, or
    its decomposition; and where XNNPACK's partitioner takes the call as a node of its own, that first."""
    from torch.utils._pytree import tree_map

    from .. import executorch as customops_executorch

    args, kwargs = tree_map(lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a,
                            (node.args, node.kwargs))
    op = node.target._opname
    by_route = (f"customops kernel ({op}.out)" if customops_executorch.uses_kernel(op, *args, **kwargs)
                else "decomposed (core ATen)")
    if customops_executorch.xnnpack_takes(op, *args, **kwargs):
        return f"XNNPACK's own node with its delegate, else {by_route}"
    return by_route
