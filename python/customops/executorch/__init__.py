"""ExecuTorch, PyTorch's on-device runtime, for the customops operators.

``executorch.exir.to_edge_transform_and_lower`` (and ``to_edge``) decomposes an exported program into core ATen
with its default table, and ``to_executorch`` then needs an out-variant kernel of every operator left: a customops
operator stopped it ("Missing out variants"). After ``import customops``, importing ExecuTorch's program module
adds to that table a decomposition of every customops operator into core ATen operators, which ExecuTorch's
portable kernels run and its delegates (XNNPACK) take: the convolutions become ``aten.convolution``, the pointwise
ops their formulas, the resize ``aten.upsample_bilinear2d`` where its coordinate convention is PyTorch's and exact
index arithmetic where it is not. They go into ExecuTorch's table only: eager calls, ``torch.export`` programs,
Inductor and ONNX keep the operators.

One module per family, discovered: each defines ``DECOMPOSITIONS`` (op name -> a function of core ATen
operations). A family without a module here takes customops.litert's (TF-Lite's converter also needs core ATen
operations), which takes Inductor's where it has none.
"""

from __future__ import annotations

import logging
import sys
from typing import Callable, Dict, Optional

import torch

from .._families import family_modules, short_name, synthesized
from .._import_hook import when_imported

__all__ = ["decompositions", "install", "is_registered"]

_log = logging.getLogger("customops.executorch")
_PROGRAM = "executorch.exir.program._program"

# Set when the registration failed (an ExecuTorch whose internals moved), and why.
error: Optional[BaseException] = None
_registered = False


def families():
    """The family modules of this package, with one made from customops.litert's module of each family that
    has none here."""
    own = family_modules(__name__, __path__)
    names = {short_name(m) for m in own}
    from .. import litert

    made = [sys.modules.get(f"{__name__}.{short_name(f)}")
            or synthesized(__name__, f, DECOMPOSITIONS=dict(f.DECOMPOSITIONS))
            for f in litert.families() if short_name(f) not in names and f.DECOMPOSITIONS]
    return sorted(own + made, key=short_name)


def decompositions() -> Dict[torch._ops.OpOverload, Callable]:
    """Every customops operator's decomposition into core ATen, as ExecuTorch's table receives them."""
    table = {}
    for family in families():
        for name, fn in family.DECOMPOSITIONS.items():
            table[getattr(torch.ops.customops, name).default] = fn
    return table


def _register(program_module) -> None:
    """Wraps the program module's default decomposition table (a function it calls for every lowering) so that
    the table it returns holds ours too."""
    global error, _registered
    try:
        default = program_module._default_decomposition_table
        if getattr(default, "_customops", False):
            return
        decompositions()  # fails here, not inside a lowering, if a family cannot be read

        def table(*args, **kwargs):
            t = default(*args, **kwargs)
            t.update(decompositions())
            return t

        table._customops = True
        program_module._default_decomposition_table = table
        _registered, error = True, None
    except Exception as e:  # importing ExecuTorch must not fail because of customops
        error = e
        _log.warning("customops.executorch: the customops operators were not registered with ExecuTorch "
                     "(%s: %s); to_executorch will stop at them", type(e).__name__, e)


def is_registered() -> bool:
    """Whether ExecuTorch's program module has been imported and decomposes every customops operator."""
    return _registered


def install() -> None:
    """Registers with ExecuTorch when its program module is first imported (now, if it already is)."""
    when_imported(_PROGRAM, _register)
