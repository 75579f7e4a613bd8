"""DTensor sharding rules for every customops operator and its backward op (one module per family).

Imported by ``customops``: where torch.distributed is available the rules are registered with DTensor, so
the ops take DTensors and compute locally on their shards wherever the maths allows (the placements each
family module lists), redistributing otherwise. ``registered`` says whether that happened, ``why_not``
why not.
"""

from __future__ import annotations

import torch

registered = False
why_not = ""

if not torch.distributed.is_available():
    why_not = "torch.distributed is not available in this build of torch"
else:
    from .._families import family_modules

    for _family in family_modules(__name__, __path__):
        _family.register_all()
    registered = True
