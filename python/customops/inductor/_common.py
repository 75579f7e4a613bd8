"""Pieces the decompositions share."""

from __future__ import annotations

import torch

from ..pointwise import opmath

__all__ = ["hint", "opmath"]


def hint(v) -> int:
    """A size's value: a static size as it is, a symbolic one by its hint (no guard: a choice of kernel made from
    it is not part of the graph's specialisation)."""
    if isinstance(v, int):
        return v
    from torch.fx.experimental import symbolic_shapes

    # optimization_hint from torch 2.15, hint_int before; a size without a hint (data-dependent) counts as large.
    value = getattr(symbolic_shapes, "optimization_hint", None) or symbolic_shapes.hint_int
    return int(value(v, fallback=8192))


def cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()
