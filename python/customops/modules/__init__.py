"""nn.Module wrappers of the functional API (scriptable and exportable).

One module per family holds its classes and names them in its ``__all__``; this package finds the modules
(customops._families) and exports every class they name, in family order."""

from __future__ import annotations

from .._families import family_modules

FAMILIES = family_modules(__name__, __path__)
__all__ = [name for family in FAMILIES for name in family.__all__]
globals().update({name: getattr(family, name) for family in FAMILIES for name in family.__all__})
