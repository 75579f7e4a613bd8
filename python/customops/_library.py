"""Finds and loads libcustomops.so, which registers the torch.ops.customops operators."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

_DEFAULT_LIBRARY = Path(__file__).resolve().parent / "lib" / "libcustomops.so"


def library_path() -> str:
    """Absolute path of the libcustomops.so this package loads.

    ``$CUSTOMOPS_LIBRARY`` overrides the copy that the build stages inside the
    package. C++ programs link the same library through the CMake package.
    """
    override = os.environ.get("CUSTOMOPS_LIBRARY")
    return str(Path(override).absolute() if override else _DEFAULT_LIBRARY)


def build_info() -> dict:
    """What the staged library was built with: torch version, CUDA on/off, CPU builds."""
    info = Path(library_path()).parent / "build_info.json"
    return json.loads(info.read_text()) if info.exists() else {}


def _load() -> None:
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            f"customops: {path} does not exist. Build it first (scripts/build.sh), "
            "or point CUSTOMOPS_LIBRARY at a built libcustomops.so."
        )
    built_for = build_info().get("torch_version")
    if built_for is not None and built_for != torch.__version__:
        raise ImportError(
            f"customops: {path} was built against torch {built_for}, but this interpreter "
            f"has torch {torch.__version__}; rebuild it (scripts/build.sh)."
        )
    torch.ops.load_library(path)


_load()
