"""AOTInductor: models that call customops operators, compiled ahead of time for C++.

torch 2.11 deprecates TorchScript (``torch.jit.script``/``torch.jit.load``) in favour of
``torch.export``; for C++ deployment its successor is AOTInductor. A model is exported,
compiled into a package (``.pt2``: generated C++ built into a shared object, plus the
weights) and run from C++ by ``torch::inductor::AOTIModelPackageLoader``, as
``examples/aoti_runner.cpp`` (``customops_aoti``) does. The compiled code calls customops
operators by name through the dispatcher, so the C++ program must have libcustomops.so
loaded: linking ``customops::customops`` does that.

    package = customops.aoti.compile_package(model, (x,), "model.pt2")
    # C++: customops_aoti model.pt2 --inputs inputs.pt --device cpu

AOTInductor builds the generated C++ with the compiler that ``$CXX`` names (``g++``
otherwise). The shared object must share libstdc++ with libtorch and libcustomops: a
compiler that links libstdc++ statically builds one that crashes when C++ objects cross
into our library. :func:`check_compiler` refuses such a compiler before compiling.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor, nn


class StaticLibstdcxxError(RuntimeError):
    """The C++ compiler AOTInductor would use links libstdc++ statically."""


def compiler() -> str:
    """The C++ compiler AOTInductor will run: ``$CXX`` when set (as read when torch._inductor
    was imported), else ``g++``."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler  # private, but it is the one AOTI uses
    except ImportError:
        return os.environ.get("CXX", "g++")
    return get_cpp_compiler()


@functools.lru_cache(maxsize=None)
def _links_libstdcxx_dynamically(cxx: str) -> bool:
    # Build a shared object, as AOTInductor does, with the same probe as CMake's check
    # (cmake/CustomopsSharedLibstdcxx.cmake): a dynamic link leaves the soname
    # libstdc++.so.6 among its needed libraries; a static one copies libstdc++ in.
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "probe.cpp", Path(tmp) / "probe.so"
        src.write_text('#include <iostream>\nextern "C" void probe() { std::cout << 1L << std::endl; }\n')
        done = subprocess.run([cxx, "-shared", "-fPIC", str(src), "-o", str(lib)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"customops: the C++ compiler {cxx!r} cannot build a shared object:\n{done.stderr}")
        return b"libstdc++.so" in lib.read_bytes()


def check_compiler(cxx: str | None = None) -> str:
    """Returns the compiler (default: :func:`compiler`) if it links libstdc++ dynamically.

    Raises :class:`StaticLibstdcxxError`, saying what to do, if it links it statically.
    """
    cxx = cxx or compiler()
    if not _links_libstdcxx_dynamically(cxx):
        raise StaticLibstdcxxError(
            f"customops: the C++ compiler AOTInductor would use ({cxx}, from $CXX) links libstdc++ statically; "
            "the compiled model would carry its own libstdc++ beside libtorch's and libcustomops' and crash. "
            "Use a compiler that links it dynamically: `export CXX=/usr/bin/g++` before starting Python "
            "(torch._inductor reads CXX when it is imported)."
        )
    return cxx


def compile_package(
    model: nn.Module | torch.export.ExportedProgram,
    inputs: Sequence[Tensor],
    package_path: str | os.PathLike,
    *,
    dynamic_shapes=None,
    inductor_configs: dict | None = None,
) -> str:
    """Exports ``model`` with ``inputs`` (unless it is already an ``ExportedProgram``) and
    compiles it into an AOTInductor package at ``package_path``; returns that path.

    The device of ``inputs`` (and of the model's parameters) is the device the package
    runs on. Checks the C++ compiler first (:func:`check_compiler`). Compiling runs the C++
    compiler over the generated code: about a minute or two on a small CPU machine.
    """
    check_compiler()
    exported = (model if isinstance(model, torch.export.ExportedProgram)
                else torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes))
    return torch._inductor.aoti_compile_and_package(
        exported, package_path=os.fspath(package_path), inductor_configs=inductor_configs
    )


class Bundle(nn.Module):
    """Several models as one, so that a single (slow) AOTInductor compile covers them all.

    ``forward`` takes every model's inputs in turn (``arity[i]`` tensors for model ``i``)
    and returns all their outputs as one tuple.
    """

    def __init__(self, models: Sequence[nn.Module], arity: Sequence[int]) -> None:
        super().__init__()
        if len(models) != len(arity):
            raise ValueError(f"Bundle: {len(models)} models but {len(arity)} arities")
        self.models = nn.ModuleList(models)
        self.arity = list(arity)

    def forward(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        if len(inputs) != sum(self.arity):
            raise ValueError(f"Bundle: expected {sum(self.arity)} inputs, got {len(inputs)}")
        outputs, start = [], 0
        for model, n in zip(self.models, self.arity):
            outputs.append(model(*inputs[start:start + n]))
            start += n
        return tuple(outputs)


def save_inputs(inputs: Sequence[Tensor], path: str | os.PathLike) -> None:
    """Writes ``inputs`` as the C++ runner reads them (``--inputs``): a list of CPU tensors."""
    torch.save([t.detach().cpu() for t in inputs], os.fspath(path))
