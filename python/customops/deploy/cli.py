"""The command line of customops.deploy: ``python -m customops.deploy.check MODEL_OR_FILE``.

Exports the model to ONNX, runs it in ONNX Runtime on its example inputs
(or, with ``--runtime tflite``, converts it to TF-Lite with onnx2tf or
litert-torch and runs it in the LiteRT interpreter) and prints the parity
table (customops.deploy.report) and the flags. Exit status:
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
        description="Export a model to ONNX (or TF-Lite) and report its parity with eager PyTorch, per "
                    "customops op.")
    parser.add_argument("model", metavar="MODEL_OR_FILE",
                        help="'module:callable' or 'file.py:callable' returning (model, args), or a .pt2 file "
                             "saved by torch.export.save")
    parser.add_argument("--atol", type=float, default=1e-4, help="largest accepted absolute difference")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="export with a dynamic first dimension on every input")
    parser.add_argument("--runtime", choices=("onnxruntime", "tflite", "executorch"), default="onnxruntime",
                        help="run the model in ONNX Runtime (default), as a TF-Lite model in LiteRT, or as an "
                             "ExecuTorch program (XNNPACK and portable kernels)")
    parser.add_argument("--converter", choices=("onnx2tf", "litert-torch"), default="onnx2tf",
                        help="with --runtime tflite: convert through ONNX with onnx2tf (default, in the "
                             "environment of python -m customops.deploy.tflite_env) or with litert-torch")
    parser.add_argument("--save", metavar="PATH",
                        help="also write the checked model (.onnx; .tflite with --runtime tflite; .pte with "
                             "--runtime executorch)")
    parser.add_argument("--save-instrumented", action="store_true",
                        help="with --save and --runtime tflite or executorch: save the checked model, which also "
                             "returns each customops op's result (for debugging a runtime, not for deployment)")
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
    tflite, executorch = options.runtime == "tflite", options.runtime == "executorch"
    if (tflite or executorch) and options.dynamic_batch:
        parser.error(f"--dynamic-batch: not with --runtime {options.runtime}")
    report = run_check(model, args, kwargs, dynamic_shapes=dynamic_shapes, atol=options.atol,
                       runtime=options.runtime, converter=options.converter,
                       save_tflite=options.save if tflite else None, save_pte=options.save if executorch else None,
                       save_instrumented=options.save_instrumented)
    print(report)
    if options.save and options.runtime == "onnxruntime":
        report.onnx_program.save(options.save)
    if options.save and (options.runtime == "onnxruntime" or report.tflite_path or report.pte_path):
        print(f"saved {options.save}")
    return 0 if report.ok and not (options.strict and report.flags) else 1
