"""Functional API. Each function calls one registered operator, so it works in eager mode, under torch.compile and
torch.export, and inside TorchScript.

One module per family holds its functions and names them in its ``__all__``; this package finds the modules
(customops._families) and exports every function they name, in family order."""

from __future__ import annotations

from .._families import exported, family_modules

FAMILIES = family_modules(__name__, __path__)
globals().update(exported(FAMILIES))
__all__ = list(exported(FAMILIES))
