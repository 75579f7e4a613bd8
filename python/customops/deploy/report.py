"""The parity report: per customops op and per model output, the largest
difference between eager PyTorch and the runtime (ONNX Runtime, or the LiteRT
interpreter on the TF-Lite model), and the layers flagged as exported with
semantics that differ, or will on common runtimes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


@dataclass
class OpParity:
    """One customops op call of the model."""

    node: str  # its node name in the exported program (and the ONNX nodes' metadata)
    op: str  # "customops.upsample_bilinear2d"
    module: str  # qualified name of the module that called it ("" if the model's own forward)
    onnx: str  # what it became, e.g. "Resize(linear, asymmetric)"; in ExecuTorch, its route (pte.route)
    shape: Tuple[int, ...]
    max_abs_diff: Optional[float]  # None where its value was not found in the ONNX graph
    call: int = 0  # the call (of ``check(..., calls=...)``) of the largest difference


@dataclass
class Flag:
    where: str  # a node name, or "model"
    # "mismatch", "coordinate_mode", "onnx2tf_opset", "size_1", "aten_upsample", "scales", "large_gather",
    # "tflite_op", "unsupported"
    kind: str
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where}: {self.message}"


@dataclass
class ParityReport:
    """What :func:`customops.deploy.check` found. ``ok`` is False when any
    difference exceeds ``atol`` (flags of other kinds are warnings)."""

    ops: List[OpParity] = field(default_factory=list)
    outputs: List[float] = field(default_factory=list)  # max |eager - runtime| per flattened model output
    flags: List[Flag] = field(default_factory=list)
    atol: float = 1e-4
    provider: str = ""  # ONNX Runtime's execution provider, or the LiteRT kernel options run
    opset: int = 0
    onnx_program: object = None  # the torch.onnx.ONNXProgram that was checked (save() it to deploy it)
    runtime: str = "onnxruntime"  # or "tflite", "executorch"
    converter: str = ""  # with runtime "tflite": "onnx2tf" or "litert-torch"
    tflite_path: Optional[str] = None  # the checked .tflite model, where check() was asked to keep it
    tflite_operators: List[Dict] = field(default_factory=list)  # its operators: {"op": name, "options": {...}}
    # The full-integer model's largest difference per output, relative to the output's range (int8_calibration).
    int8_outputs: List[float] = field(default_factory=list)
    pte_path: Optional[str] = None  # with runtime "executorch": the model's program, where check() was asked to keep it
    # Per lowering ("xnnpack", "portable"): the program's kernels and their counts ("xnnpack": delegate calls).
    pte_operators: Dict[str, Dict[str, int]] = field(default_factory=dict)
    # How many calls were compared (``check(..., calls=...)``), the call of each output's largest difference, and
    # (ExecuTorch) per buffer the model's graph mutates, its state, max |eager - runtime| after the last call.
    calls: int = 1
    output_calls: List[int] = field(default_factory=list)
    state: Dict[str, float] = field(default_factory=dict)

    @property
    def max_abs_diff(self) -> float:
        return max(self.outputs, default=0.0)

    @property
    def mismatches(self) -> List[Flag]:
        return [f for f in self.flags if f.kind == "mismatch"]

    @property
    def ok(self) -> bool:
        """No difference above atol, and nothing the runtime could not run (an ``unsupported`` flag)."""
        return not self.mismatches and not any(f.kind == "unsupported" for f in self.flags)

    def __str__(self) -> str:
        header = ("op", "node", "module", "route" if self.runtime == "executorch" else "ONNX", "shape", "max |diff|")
        runtime = {"onnxruntime": "ONNX Runtime", "executorch": "ExecuTorch"}.get(self.runtime,
                                                                                 f"TF-Lite via {self.converter}")
        rows = [(p.op.removeprefix("customops."), p.node, p.module or "-", p.onnx, _shape(p.shape),
                 _number(p.max_abs_diff), str(p.call)) for p in self.ops]
        calls = self.output_calls or [0] * len(self.outputs)
        rows += [(f"output[{i}]", "", "", "", "", _number(d), str(c))
                 for i, (d, c) in enumerate(zip(self.outputs, calls))]
        rows += [(f"buffer {name}", "", "", "", "", _number(d), "last") for name, d in self.state.items()]
        if self.calls > 1:  # which call gave each largest difference
            header += ("call",)
        else:
            rows = [r[:-1] for r in rows]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        line = lambda r: "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        opset = f", opset {self.opset}" if self.opset else ""
        over = f", over {self.calls} calls" if self.calls > 1 else ""
        lines = [f"customops parity: eager PyTorch vs {runtime} ({self.provider}{opset}), atol {self.atol:g}{over}",
                 line(header), *map(line, rows)]
        if not self.ops:
            lines.append("  (no customops ops in the model)")
        if self.tflite_operators:
            from .tflite import summary

            lines.append(f"TF-Lite operators: {summary(self.tflite_operators)}")
        for lowering, kernels in self.pte_operators.items():
            listed = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(kernels.items())) or "none"
            lines.append(f"ExecuTorch kernels ({lowering}): {listed}")
        if self.int8_outputs:
            lines.append("int8 (full-integer) model, max |diff| / output range: "
                         + ", ".join(f"{e:.2e}" for e in self.int8_outputs))
        lines.append(f"flags: {len(self.flags)}" if self.flags else "flags: none")
        lines += [f"  {f}" for f in self.flags]
        if self.ok:
            lines.append("parity: OK")
        elif self.mismatches:
            lines.append(f"parity: FAILED ({len(self.mismatches)} above atol)")
        else:
            lines.append("parity: FAILED (not supported by the runtime)")
        return "\n".join(lines)


def _number(v: Optional[float]) -> str:
    if v is None:
        return "not found"
    return "nan" if math.isnan(v) else f"{v:.2e}"


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"
