"""The translations as onnxscript functions, and their registration where
torch.onnx.export(dynamo=True) looks for translations by default.

torch.onnx (2.11 to 2.15) has no public way to add translations for every
export: its public extension point is per call (custom_translation_table).
Each export builds its registry with ONNXRegistry.from_torchlib(), from two
tables: torch's own (torch.onnx._internal.exporter._torchlib, private to torch)
and onnxscript's torch_lib registry (onnxscript_apis.get_torchlib_ops), which
is where the exporter finds torchvision::nms and torchvision::roi_align. The
latter is filled through onnxscript's torch_lib registration module (not a
private name), so customops adds its ops there, under their qualified names
("customops::conv2d"). tests/python/test_onnx.py checks, through the private
from_torchlib, that the exporter still reads it, and fails if torch stops.
"""

from __future__ import annotations

import functools
import importlib

import onnxscript
import torch

from .._families import family_modules
from ._hook import TORCHLIB_REGISTRATION

_FAMILIES = family_modules(__package__, importlib.import_module(__package__).__path__)

# The traced functions' own opset. They are traced (their ONNX nodes go into the
# graph), so this domain never appears in an exported model.
_OPSET = onnxscript.values.Opset("pkg.customops", 1)

@functools.cache
def traced() -> dict[str, onnxscript.values.TracedOnnxFunction]:
    """op name -> its translation as a traced onnxscript function."""
    table = {}
    for family in _FAMILIES:
        for name, function in family.TRANSLATIONS.items():
            table[name] = onnxscript.values.TracedOnnxFunction(_OPSET, function)
    return table


def overload(name: str):
    """torch.ops.customops.<op>.<overload> for "op" (the default overload) or "op.overload"."""
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.customops, packet), overload or "default")


def translation_table() -> dict:
    return {overload(name): function for name, function in traced().items()}


def qualified_name(name: str) -> str:
    return f"customops::{name}"


def _torchlib_registry():
    return importlib.import_module(TORCHLIB_REGISTRATION).default_registry


def register() -> None:
    registry = _torchlib_registry()
    for name, function in traced().items():
        # The registry warns on a second registration; register() runs once per
        # import of that module, and again when called explicitly.
        if qualified_name(name) not in registry:
            registry.register(function, qualified_name(name))


def is_registered() -> bool:
    registry = _torchlib_registry()
    return all(qualified_name(name) in registry for name in traced())
