"""The command line of customops.deploy: ``python -m customops.deploy.check MODEL_OR_FILE``.

Exports the model to ONNX, runs it in ONNX Runtime on its example inputs and
prints the parity table (customops.deploy.report) and the flags. Exit status:
0 if every difference is within --atol (and, with --strict, nothing is
flagged), 1 otherwise, 2 for bad arguments. customops.deploy.source says what
MODEL_OR_FILE may be.
"""

from __future__ import annotations

import argparse
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m customops.deploy.check",
        description="Export a model to ONNX and report its parity with eager PyTorch, per customops op.")
    parser.add_argument("model", metavar="MODEL_OR_FILE",
                        help="'module:callable' or 'file.py:callable' returning (model, args), or a .pt2 file "
                             "saved by torch.export.save")
    parser.add_argument("--atol", type=float, default=1e-4, help="largest accepted absolute difference")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="export with a dynamic first dimension on every input")
    parser.add_argument("--save", metavar="PATH.onnx", help="also write the checked ONNX model")
    parser.add_argument("--strict", action="store_true", help="exit 1 on any flag, not only on mismatches")
    options = parser.parse_args(argv)

    import torch

    import customops  # noqa: F401  (the ops and their translations)

    from ._parity import check as run_check
    from .source import load

    try:
        model, args, kwargs = load(options.model)
    except (FileNotFoundError, ValueError, TypeError, ImportError) as e:
        parser.error(str(e))
    if isinstance(model, torch.nn.Module):
        model.eval()
    dynamic_shapes = None
    if options.dynamic_batch:
        batch = torch.export.Dim("batch")
        dynamic_shapes = tuple({0: batch} if isinstance(a, torch.Tensor) and a.dim() else None for a in args)
    report = run_check(model, args, kwargs, dynamic_shapes=dynamic_shapes, atol=options.atol)
    print(report)
    if options.save:
        report.onnx_program.save(options.save)
        print(f"saved {options.save}")
    return 0 if report.ok and not (options.strict and report.flags) else 1
