"""customops: C++/CUDA PyTorch operators registered with the dispatcher.

Importing the package loads libcustomops.so, which registers
``torch.ops.customops.*`` (CPU, CUDA, Meta and Autograd kernels). The same
library serves TorchScript, torch.compile, torch.export and C++ programs.
Where torch.distributed is available, the ops' DTensor sharding rules are
registered too (``customops.sharding``), and torch.func transforms see Python
autograd.Functions of every op (``customops.func``). ``torch.onnx.export(...,
dynamo=True)`` translates the ops to standard ONNX (``customops.onnx``; needs
``pip install 'customops[onnx]'``), ``customops.deploy`` reports the parity
of an exported model with eager PyTorch (ONNX Runtime or TF-Lite), and
litert-torch's ``litert_torch.convert`` converts the ops (``customops.litert``).
"""

import sys as _sys


def _running_a_dev_tool() -> bool:
    """Whether this process is ``python -m customops.dev.<tool>``: the contributors' tools (the operator scaffold)
    work on a source checkout's files and run before its first build, when there is no library to load."""
    argv = getattr(_sys, "orig_argv", ())
    return any(flag.startswith("-m") and (flag[2:] or module).startswith(f"{__name__}.dev.")
               for flag, module in zip(argv, [*argv[1:], ""]))


# The package without its library for those tools; with it for everything else.
if not _running_a_dev_tool():
    from ._package import *  # noqa: F401,F403  (loads libcustomops.so)
    from ._package import __all__, __getattr__, __version__, cmake_prefix_path  # noqa: F401
