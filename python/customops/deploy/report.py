"""The parity report: per customops op and per model output, the largest
difference between eager PyTorch and ONNX Runtime, and the layers flagged as
exported with semantics that differ, or will on common runtimes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Tuple


@dataclass
class OpParity:
    """One customops op call of the model."""

    node: str  # its node name in the exported program (and the ONNX nodes' metadata)
    op: str  # "customops.upsample_bilinear2d"
    module: str  # qualified name of the module that called it ("" if the model's own forward)
    onnx: str  # what it became, e.g. "Resize(linear, asymmetric)"
    shape: Tuple[int, ...]
    max_abs_diff: Optional[float]  # None where its value was not found in the ONNX graph


@dataclass
class Flag:
    where: str  # a node name, or "model"
    kind: str  # "mismatch", "coordinate_mode", "size_1", "aten_upsample", "scales", "large_gather"
    message: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where}: {self.message}"


@dataclass
class ParityReport:
    """What :func:`customops.deploy.check` found. ``ok`` is False when any
    difference exceeds ``atol`` (flags of other kinds are warnings)."""

    ops: List[OpParity] = field(default_factory=list)
    outputs: List[float] = field(default_factory=list)  # max |eager - ORT| per flattened model output
    flags: List[Flag] = field(default_factory=list)
    atol: float = 1e-4
    provider: str = ""
    opset: int = 0
    onnx_program: object = None  # the torch.onnx.ONNXProgram that was checked (save() it to deploy it)

    @property
    def max_abs_diff(self) -> float:
        return max(self.outputs, default=0.0)

    @property
    def mismatches(self) -> List[Flag]:
        return [f for f in self.flags if f.kind == "mismatch"]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __str__(self) -> str:
        header = ("op", "node", "module", "ONNX", "shape", "max |diff|")
        rows = [(p.op.removeprefix("customops."), p.node, p.module or "-", p.onnx, _shape(p.shape),
                 _number(p.max_abs_diff)) for p in self.ops]
        rows += [(f"output[{i}]", "", "", "", "", _number(d)) for i, d in enumerate(self.outputs)]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        line = lambda r: "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        lines = [f"customops parity: eager PyTorch vs ONNX Runtime ({self.provider}, opset {self.opset}), "
                 f"atol {self.atol:g}", line(header), *map(line, rows)]
        if not self.ops:
            lines.append("  (no customops ops in the model)")
        lines.append(f"flags: {len(self.flags)}" if self.flags else "flags: none")
        lines += [f"  {f}" for f in self.flags]
        lines.append("parity: OK" if self.ok else f"parity: FAILED ({len(self.mismatches)} above atol)")
        return "\n".join(lines)


def _number(v: Optional[float]) -> str:
    if v is None:
        return "not found"
    return "nan" if math.isnan(v) else f"{v:.2e}"


def _shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"
