"""Functional API. Each function calls one registered operator, so it works in eager mode, under torch.compile and
torch.export, and inside TorchScript.

One module per family holds its functions and names them in its ``__all__``; this package finds the modules
(customops._families) and exports every function they name, in family order."""

from __future__ import annotations

from .._families import family_modules

FAMILIES = family_modules(__name__, __path__)
__all__ = [name for family in FAMILIES for name in family.__all__]
globals().update({name: getattr(family, name) for family in FAMILIES for name in family.__all__})
