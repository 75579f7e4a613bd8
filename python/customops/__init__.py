"""customops: C++/CUDA PyTorch operators registered with the dispatcher.

Importing the package loads libcustomops.so, which registers
``torch.ops.customops.*`` (CPU, CUDA, Meta and Autograd kernels). The same
library serves TorchScript, torch.compile, torch.export and C++ programs.
"""

from ._library import build_info, library_path
from .functional import col2im, im2col, quick_gelu
from .modules import Col2im, Im2col, QuickGELU

__version__ = build_info().get("version", "0+unknown")

__all__ = ["Col2im", "Im2col", "QuickGELU", "build_info", "col2im", "im2col", "library_path", "quick_gelu"]
