"""customops' part of torch.compile's cache keys.

The on-disk caches (AOTAutograd's and Inductor's FX graph cache) key a graph by Dynamo's graph, which holds our
ops by name, and by torch's own code and settings; not by what customops makes of the ops when compiling:
whether an op is decomposed, the choice of kernel a depthwise pass is given when traced, the lowerings and their
layout constraints, the Meta kernels' strides. Left out, a warm cache hands back graphs compiled under other
choices or by another customops, silently: ``set_decomposed`` or ``customops.backends.set`` seem to do nothing,
and an upgraded customops keeps the code of the one before.

So customops writes a digest of all of that into ``torch.compiler.config.cache_key_tag``, the tag torch adds to
every compile cache key, as ``customops-<digest>`` after whatever tag the user gave (``|``-separated), which it
keeps: when Inductor is imported, when a choice changes through customops (``set_decomposed``,
``customops.backends.set`` and ``use``), and at the start of every compile (Dynamo's compile-start callbacks, which
run before any key is made, and which ``torch._dynamo.reset()`` clears: the next refresh adds ours back). Timed
choices (``torch.backends.cudnn.benchmark``) are keyed by the flag, not by the timings: a graph cached in another
process keeps the choices timed there.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path

import torch

_PREFIX = "customops-"
_PACKAGE = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=None)
def _code() -> str:
    """The package's Python code and the library it loaded, once per process: the decompositions, lowerings and
    layout constraints, and the schemas and Meta kernels a compile traces."""
    from .._library import library_path

    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        digest.update(path.read_bytes())
    # By content, not by path or time: the same customops installed elsewhere finds the graphs cached for it
    # (torch.compiler.save_cache_artifacts), a rebuild that changed anything does not.
    with open(library_path(), "rb") as library:
        for block in iter(lambda: library.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def digest() -> str:
    """What a graph compiled now depends on beyond what torch keys: the code above, which ops are decomposed, the
    kernel policies and whether choices are timed."""
    from .. import backends
    from . import decomposed

    state = (
        _code(),
        sorted(decomposed().items()),
        sorted((op, backends.get(op)) for op in backends.ops()),
        torch.backends.cudnn.benchmark,
    )
    return hashlib.sha256(repr(state).encode()).hexdigest()[:16]


def tagged(tag: str, ours: str) -> str:
    """`tag` with customops' part replaced by `ours` (the user's parts kept, in order)."""
    parts = [p for p in tag.split("|") if p and not p.startswith(_PREFIX)]
    return "|".join([*parts, _PREFIX + ours])


def refresh(*_args) -> None:
    """Writes the current digest into torch's cache key tag, and makes sure the next compile refreshes it too."""
    from torch.compiler import config

    config.cache_key_tag = tagged(config.cache_key_tag, digest())
    callbacks = sys.modules.get("torch._dynamo.callback")
    if callbacks is not None:
        install(callbacks)


def install(callbacks) -> None:
    """Refreshes the tag at the start of every compile (torch._dynamo.callback's handler)."""
    handler = getattr(callbacks, "callback_handler", None)
    if handler is not None and refresh not in handler.start_callbacks:
        handler.register_start_callback(refresh)
