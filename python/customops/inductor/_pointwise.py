"""A pointwise family's decompositions, made from its formulas (customops.pointwise): evaluated in the kernels'
opmath type, so that Inductor fuses them with the operations around them."""

from __future__ import annotations

from types import ModuleType

from .._families import short_name, synthesized
from ..pointwise import on_tensors


def forward_of(formulas: ModuleType):
    return lambda *xs: on_tensors(formulas.forward, *xs)


def backward_of(formulas: ModuleType):
    n = len(formulas.INPUTS)

    def backward(grad_out, *xs):
        grads = tuple(on_tensors(lambda m, g, *v, i=i: g * formulas.derivatives(m, *v)[i], grad_out, *xs)
                      for i in range(n))
        return grads[0] if n == 1 else grads

    return backward


def family(formulas: ModuleType) -> ModuleType:
    name = short_name(formulas)
    decomposed, measurement, why = formulas.COMPILED
    return synthesized(
        __package__, formulas, OP=name, DECOMPOSED_BY_DEFAULT=decomposed,
        DECOMPOSITIONS={name: forward_of(formulas), f"{name}_backward": backward_of(formulas)},
        DOC_ROWS=[(f"`{name}` (+ backward)", "decomposed" if decomposed else "kept whole", measurement, why)])
