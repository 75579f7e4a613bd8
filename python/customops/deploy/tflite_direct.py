"""The direct PyTorch -> TF-Lite path of customops.deploy.check: litert-torch
converts the exported program (customops.litert registers the operators with
it) and the LiteRT interpreter runs the result, both in this process.

litert-torch keeps PyTorch's NCHW layout at the model's inputs and outputs.
So that each customops op's own result can be compared, the converted module
returns those results beside the model's outputs (as the ONNX path adds them
as graph outputs).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Iterable, List, Optional, Sequence

import torch

from . import tflite_worker
from .graph import WithValues

INSTALL_HINT = "pip install litert-torch (its releases take torch 2.4 to 2.14)"


def _require():
    from .. import litert

    litert.require_supported_torch()
    try:
        import litert_torch
    except ImportError as e:
        raise ImportError(f"customops.deploy: converter='litert-torch' needs litert-torch, which is not installed: "
                          f"{INSTALL_HINT}") from e
    if not litert.is_registered():
        raise RuntimeError(f"customops.deploy: the customops operators are not registered with litert-torch: "
                           f"{litert.error}")
    return litert_torch


def run(exported: torch.export.ExportedProgram, inputs: Sequence[torch.Tensor], value_nodes: List[str],
        n_outputs: int, resolvers: Iterable[str], keep: Optional[str] = None, instrumented: bool = False) -> dict:
    """Converts ``exported`` with litert-torch and runs it on ``inputs``.

    Returns ``{"runs": {resolver: [the model's outputs, then each value node's result]}, "operators": [...],
    "tflite": path}``."""
    litert_torch = _require()
    module = WithValues(exported, value_nodes)  # an exported module is in eval mode already
    with tempfile.TemporaryDirectory(prefix="customops-litert-") as workdir:
        path = os.path.join(workdir, "model.tflite")
        litert_torch.convert(module, tuple(t.detach().cpu() for t in inputs)).export(path)
        operators = tflite_worker.operators(path)
        feeds = [t.detach().cpu().numpy() for t in inputs]
        runs = {resolver: tflite_worker.run_in_order(path, resolver, feeds) for resolver in resolvers}
        if keep is not None and instrumented:
            shutil.copyfile(path, keep)
    if keep is not None and not instrumented:  # the deployable model: its own outputs only
        litert_torch.convert(exported.module(), tuple(t.detach().cpu() for t in inputs)).export(keep)
    expected = n_outputs + len(value_nodes)
    for resolver, outputs in runs.items():
        if len(outputs) != expected:
            raise RuntimeError(f"customops.deploy: the TF-Lite model from litert-torch has {len(outputs)} outputs, "
                               f"expected {expected}")
    return {"runs": runs, "operators": operators, "tflite": keep}
