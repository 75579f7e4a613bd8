"""The package's contents (customops/__init__.py imports them all, unless a contributors' tool runs without the
library): the library, loaded, and every concern that registers with it."""

from ._library import build_info, library_path, runner_path  # loads libcustomops.so
from ._library import cmake_prefix_path as _cmake_prefix_path
from . import aoti
from . import backends  # noqa: F401  (which implementation CUDA ops run where PyTorch has one too)
from . import func  # noqa: F401  (torch.func support: registers Python kernels for transforms)
from . import sharding  # noqa: E402,F401  (DTensor sharding rules; after the library registered the ops)
from .convert import ConversionReport, convert
from . import inductor  # noqa: E402  (which ops torch.compile's Inductor decomposes)
from . import litert  # noqa: E402  (the ops in litert-torch's PyTorch -> TF-Lite conversion)
from . import executorch  # noqa: E402  (the ops in ExecuTorch programs)
from .onnx import _hook as _onnx_hook
from . import functional, modules
# Every op's function and nn.Module, which their packages find per family (a new op's come with its files).
from .functional import *  # noqa: E402,F401,F403
from .modules import *  # noqa: E402,F401,F403

# The ONNX translations join torch.onnx.export's registry when the exporter first loads it,
# so that importing customops does not import onnxscript (customops/onnx/_hook.py says why).
_onnx_hook.install()
# Likewise the Inductor-only decompositions join Inductor's table when Inductor is first imported,
# and the ops' decompositions and lowerings join litert-torch's tables when it is first imported, and
# ExecuTorch's when its program module is.
inductor.install()
litert.install()
executorch.install()

__version__ = build_info().get("version", "0+unknown")
# For find_package(customops) in C++ projects, as torch.utils.cmake_prefix_path for Torch:
# CMAKE_PREFIX_PATH="customops.cmake_prefix_path;torch.utils.cmake_prefix_path". None unless
# installed with pip.
cmake_prefix_path = _cmake_prefix_path()


def __getattr__(name: str):
    # customops.deploy imports onnx and onnxruntime only when used.
    if name == "deploy":
        import importlib

        return importlib.import_module(".deploy", __package__)
    raise AttributeError(f"module {__package__!r} has no attribute {name!r}")


__all__ = [
    "ConversionReport", "aoti", "backends", "build_info", "cmake_prefix_path", "convert", "executorch", "functional",
    "inductor", "library_path", "litert", "modules", "runner_path", *functional.__all__, *modules.__all__,
]
