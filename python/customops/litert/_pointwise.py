"""A pointwise family for litert-torch: its formulas in ATen operations, the Inductor decomposition."""

from __future__ import annotations

from types import ModuleType

from .._families import short_name, synthesized
from ..inductor._pointwise import forward_of


def family(formulas: ModuleType) -> ModuleType:
    return synthesized(__package__, formulas, DECOMPOSITIONS={short_name(formulas): forward_of(formulas)})
