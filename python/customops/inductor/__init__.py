"""How torch.compile's Inductor treats the customops operators.

Inside a compiled graph an operator is either one call of our kernel, which Inductor schedules as an opaque
fallback, or decomposed into ATen operations that Inductor generates code for and fuses with the operations
around it. Where Inductor's code does the work as fast as our kernel, the decomposition wins: a resize
followed by a ReLU becomes one kernel instead of two passes over the resized tensor. Where ours is faster,
the op stays whole. One module per family gives its decompositions and the default; the user guide's
torch.compile page lists the choice per op with the measurement that made it.

Decompositions go into Inductor's own table only (``torch._inductor.decomposition.decompositions``), which
nothing but Inductor reads: eager calls, TorchScript, ``torch.export`` programs and ONNX export keep the op.
They are added when Inductor is first imported (``customops._import_hook``), so ``import customops`` does not
import Inductor. ``set_decomposed`` changes the choice for graphs compiled afterwards.
"""

from __future__ import annotations

from typing import Callable, Dict

import torch

from .._families import family_modules, short_name
from .._import_hook import when_imported
from . import _cache_key

__all__ = ["decomposed", "set_decomposed"]

_INDUCTOR_TABLE = "torch._inductor.decomposition"
_INDUCTOR_LOWERINGS = "torch._inductor.lowering"

# op name -> its family module ({overload name: decomposition}, and whether compiled graphs decompose it by
# default). A family without a module here keeps its ops whole in compiled graphs.
_FAMILIES = {family.OP: family for family in family_modules(__name__, __path__)}
_decomposed: Dict[str, bool] = {name: family.DECOMPOSED_BY_DEFAULT for name, family in _FAMILIES.items()}


def families():
    """The family modules of this package: each one's op (OP), its decompositions and its default."""
    return [_FAMILIES[name] for name in sorted(_FAMILIES, key=lambda n: short_name(_FAMILIES[n]))]


def overload(name: str) -> torch._ops.OpOverload:
    """torch.ops.customops.<op>.<overload> for a decomposition's key: "op" (the default overload) or
    "op.overload"."""
    packet, _, which = name.partition(".")
    return getattr(getattr(torch.ops.customops, packet), which or "default")


def _table(name: str) -> Dict[torch._ops.OpOverload, Callable]:
    return {overload(key): fn for key, fn in _FAMILIES[name].DECOMPOSITIONS.items()}


def _sync(module=None) -> None:
    """Makes Inductor's table hold exactly the decompositions of the ops set to be decomposed."""
    import sys

    inductor = module or sys.modules.get(_INDUCTOR_TABLE)
    if inductor is None:
        return
    for name in _FAMILIES:
        for op, fn in _table(name).items():
            if _decomposed[name]:
                inductor.decompositions[op] = fn
            elif inductor.decompositions.get(op) is fn:
                del inductor.decompositions[op]
    # Inductor's table for compiles is a cached copy of this one (fast_random_decomps): make it take the change.
    cached = getattr(inductor, "fast_random_decomps", None)
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()


def decomposed() -> Dict[str, bool]:
    """Whether each op with a decomposition is decomposed in graphs Inductor compiles (op name -> bool)."""
    return dict(_decomposed)


def set_decomposed(op: str, value: bool) -> None:
    """Decompose ``op`` (one of :func:`decomposed`'s keys: ``"quick_gelu"``, ``"upsample_bilinear2d"``, ...) in
    graphs Inductor compiles from now on (``True``), or keep it one call of the customops kernel (``False``).
    Graphs compiled before keep their choice; ``torch._dynamo.reset()`` drops them. The on-disk compile caches
    key graphs by it (customops' part of their keys: ``customops.inductor._cache_key``)."""
    if op not in _FAMILIES:
        raise ValueError(f"customops.inductor.set_decomposed: no decomposition for op {op!r}; "
                         f"expected one of {sorted(_FAMILIES)}")
    _decomposed[op] = bool(value)
    _sync()
    _cache_key.refresh()


def _fallbacks(lowering) -> None:
    """Gives each op with a decomposition the fallback lowering (one call of our kernel) it gets when kept whole.

    A decomposition may decline a call (return ``NotImplemented``: upsample's backward under deterministic
    algorithms), which leaves the op in the graph while it is still in the decomposition table; Inductor's
    implicit fallback refuses such an op ("both a fallback and a decomp for same op"). Made up front, with the
    layout constraint the implicit one takes (the schema's tag) or the family's own (its LAYOUT_CONSTRAINTS, by
    decomposition key), it serves every graph, whatever was compiled before."""
    from torch._library.utils import get_layout_constraint_tag

    for family in _FAMILIES.values():
        for key, op in ((key, overload(key)) for key in family.DECOMPOSITIONS):
            if op in lowering.lowerings:
                continue
            own = getattr(family, "LAYOUT_CONSTRAINTS", {}).get(key)
            constraint = None if own else lowering.tag_to_layout_constraint(
                get_layout_constraint_tag(op, with_default=True))
            lowering.make_fallback(op, layout_constraint=constraint, warn=False, override_decomp=True)
            if own:
                lowering.register_lowering(op, type_promotion_kind=None)(
                    _constrained(lowering.fallback_handler(op), own))


def _constrained(fallback, constraint):
    """The fallback lowering with the family's layout constraint applied first. Inductor looks a registered
    constraint up only for an op whose schema has no layout tag, and ours have flexible_layout: the default for
    every call that does not say otherwise."""
    def lower(*args, **kwargs):
        from torch._inductor.virtualized import V

        args, kwargs = constraint(V.graph.current_node, *args, **kwargs)
        return fallback(*args, **kwargs)

    lower._is_fallback_handler = True  # Inductor's mark of a fallback, as fallback_handler sets it
    return lower


def install() -> None:
    when_imported(_INDUCTOR_TABLE, _sync)
    when_imported(_INDUCTOR_LOWERINGS, _fallbacks)
    when_imported(_INDUCTOR_LOWERINGS, _cache_key.refresh)
    when_imported("torch._dynamo.callback", _cache_key.install)
