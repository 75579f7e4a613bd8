"""ExecuTorch, PyTorch's on-device runtime, for the customops operators.

``executorch.exir.to_edge_transform_and_lower`` (and ``to_edge``) decomposes an exported program into core ATen
with its default table, and ``to_executorch`` then needs an out-variant kernel of every operator left: a customops
operator stopped it ("Missing out variants"). After ``import customops``, importing ExecuTorch's program module
adds to that table a decomposition into core ATen operators of every customops operator routed to one, which
ExecuTorch's portable kernels run and its delegates (XNNPACK) take: the convolutions become
``aten.convolution``, the pointwise ops their formulas, the resize ``aten.upsample_bilinear2d``. They go into
ExecuTorch's table only: eager calls, ``torch.export`` programs, Inductor and ONNX keep the operators.

Some ops run with customops' own CPU kernels instead (kernels/executorch/, built as libcustomops_executorch.so
against the executorch package): where there is no exact or no fast core-ATen form, the op stays in the program as
its out variant (``customops::<op>.out``), which the runtime runs once that library is loaded (``load_kernels``
here; a C++ app links it). ``routes()`` tells each op's route; ``set_route`` changes one, e.g. to lower for a
runtime without customops' kernels.

One module per family, discovered: each defines ``DECOMPOSITIONS`` (op name -> a function of core ATen
operations) and may define ``KERNELS`` (op name -> its default route, for the ops customops' kernels run),
``KERNEL_WHEN`` (op name -> whether a call on the kernel route takes the kernel) and ``XNNPACK`` (op name -> a node
of XNNPACK's own that computes the calls it takes exactly, where no core-ATen operator does: ``_xnnpack``). A
family without a module here takes customops.litert's decompositions (TF-Lite's converter also needs core ATen
operations), which takes Inductor's where it has none.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Dict, Optional, Set

import torch

from .._families import family_modules, short_name, synthesized
from .._import_hook import when_imported
from . import _xnnpack
from ._tensors import load_tensors, save_tensors

__all__ = ["decompositions", "install", "is_registered", "kernel_library", "kernel_ops", "load_kernels",
           "load_tensors", "routes", "save_tensors", "set_route", "use_route", "uses_kernel", "xnnpack_takes"]

_log = logging.getLogger("customops.executorch")
_PROGRAM = "executorch.exir.program._program"

ROUTES = ("kernel", "decomposition")
# Routes set by set_route (op name -> route); the others are the family's default.
_chosen: Dict[str, str] = {}
_loaded: Optional[str] = None

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


def kernel_library() -> Optional[str]:
    """Path of libcustomops_executorch.so, customops' ExecuTorch kernels (beside libcustomops.so: built when the
    build's Python has executorch), or None."""
    from .._library import library_path

    path = Path(library_path()).with_name("libcustomops_executorch.so")
    return str(path) if path.exists() else None


def load_kernels() -> str:
    """Registers customops' kernels with ExecuTorch's runtime in this process (its Python runtime then runs
    programs that call them); returns the library's path. Raises FileNotFoundError without one."""
    global _loaded
    if _loaded is None:
        path = kernel_library()
        if path is None:
            raise FileNotFoundError("customops: libcustomops_executorch.so was not built (the build's Python had no "
                                    "executorch: pip install executorch, then rebuild customops)")
        # Before the runtime's own extension, if need be: both resolve libexecutorch.so to the one loaded copy.
        ctypes.CDLL(path, mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
        _loaded = path
    return _loaded


def kernel_ops() -> Set[str]:
    """The ops customops' ExecuTorch kernels run (the keys of each family's ``KERNELS``)."""
    return {op for family in families() for op in getattr(family, "KERNELS", {})}


def routes() -> Dict[str, str]:
    """Each op's route into ExecuTorch programs: ``"kernel"`` (customops' kernel, the op's out variant left in the
    program) or ``"decomposition"`` (core ATen operators). By default each op with a kernel takes the route its
    family's ``KERNELS`` gives (the faster one, measured: docs/deploy.md) when the kernel library was built."""
    built = kernel_library() is not None
    table = {}
    for family in families():
        for op in family.DECOMPOSITIONS:
            table[op] = "decomposition"
        for op, default in getattr(family, "KERNELS", {}).items():
            table[op] = default if built else "decomposition"
    table.update(_chosen)
    return dict(sorted(table.items()))


def set_route(op: str, route: Optional[str]) -> None:
    """Sets `op`'s route (``"kernel"`` or ``"decomposition"``) for the programs lowered from now on; None restores
    the default. A program lowered with ``"kernel"`` runs only where customops' kernels are loaded."""
    if route is not None and route not in ROUTES:
        raise ValueError(f"customops.executorch: route must be one of {ROUTES} or None, got {route!r}")
    if op not in routes():
        raise ValueError(f"customops.executorch: no op {op!r}; the ops: {', '.join(routes())}")
    if route == "kernel" and op not in kernel_ops():
        raise ValueError(f"customops.executorch: customops has no ExecuTorch kernel of {op}; the ops it has: "
                         f"{', '.join(kernel_ops()) or 'none'}")
    if route is None:
        _chosen.pop(op, None)
    else:
        _chosen[op] = route


@contextlib.contextmanager
def use_route(op: str, route: str):
    """``set_route(op, route)`` for the block, then the route before it."""
    before = _chosen.get(op)
    set_route(op, route)
    try:
        yield
    finally:
        set_route(op, before)


def uses_kernel(op: str, *args, **kwargs) -> bool:
    """Whether a call of `op` with these arguments (tensors or fake tensors) is left to customops' kernel in the
    programs lowered now: its route is ``"kernel"`` and its family's ``KERNEL_WHEN`` (where given) takes it."""
    if routes().get(op) != "kernel":
        return False
    when = next((f.KERNEL_WHEN[op] for f in families() if op in getattr(f, "KERNEL_WHEN", {})), None)
    return when is None or bool(when(*args, **kwargs))


def xnnpack_takes(op: str, *args, **kwargs) -> bool:
    """Whether XNNPACK's partitioner, where it lowers the program, runs a call of `op` with these arguments as a
    node of XNNPACK's own (its family's ``XNNPACK``), whatever the op's route."""
    entry = _xnnpack.entries().get(op)
    return entry is not None and bool(entry.takes(*args, **kwargs))


def _overload(name: str) -> torch._ops.OpOverload:
    # A decomposition's key: "op" (the default overload) or "op.overload" (one without customops' kernel here).
    packet, _, which = name.partition(".")
    return getattr(getattr(torch.ops.customops, packet), which or "default")


def _unless_kernel(when: Callable, fn: Callable) -> Callable:
    # NotImplemented from a decomposition leaves the call as it is (torch's tracer): it becomes the out variant.
    def decomposition(*args, **kwargs):
        return NotImplemented if when(*args, **kwargs) else fn(*args, **kwargs)

    return decomposition


def decompositions(every: bool = False) -> Dict[torch._ops.OpOverload, Callable]:
    """The decompositions into core ATen that ExecuTorch's table receives: those of the ops routed to one, and of
    the calls of kernel-routed ops that their ``KERNEL_WHEN`` leaves to the decomposition (every op's, all
    decomposing, with `every`)."""
    chosen = routes()
    table = {}
    for family in families():
        when = getattr(family, "KERNEL_WHEN", {})
        for name, fn in family.DECOMPOSITIONS.items():
            if every or chosen.get(name) == "decomposition":
                table[_overload(name)] = fn
            elif name in when:  # on the kernel route, decided per call
                table[_overload(name)] = _unless_kernel(when[name], fn)
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
    """Registers with ExecuTorch when its program module is first imported (now, if it already is), and with its
    XNNPACK backend when that is (the families' ``XNNPACK`` nodes: _xnnpack)."""
    when_imported(_PROGRAM, _register)
    _xnnpack.install()
