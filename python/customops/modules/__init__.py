"""nn.Module wrappers of the functional API (scriptable and exportable).

One module per family holds its classes and names them in its ``__all__``; this package finds the modules
(customops._families) and exports every class they name, in family order."""

from __future__ import annotations

from .._families import exported, family_modules

FAMILIES = family_modules(__name__, __path__)
globals().update(exported(FAMILIES))
__all__ = list(exported(FAMILIES))
