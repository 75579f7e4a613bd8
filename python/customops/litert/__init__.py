"""litert-torch (PyTorch -> TF-Lite without ONNX) for the customops operators.

``litert_torch.convert(model, args)`` lowers the ATen operations of an
exported program one by one and stops at any operator it has no lowering for.
After ``import customops``, importing litert_torch registers, for every
customops operator, either a decomposition into ATen operations that it
already converts (the convolutions become aten.convolution, so TF-Lite's
CONV_2D and DEPTHWISE_CONV_2D, inside litert-torch's NHWC layout pass), or a
lowering of its own (the resize: one RESIZE_BILINEAR with the flags of its
coordinate mode, which no ATen resize expresses for ``asymmetric``). They go
into litert-torch's tables only: eager calls, torch.export and ONNX keep the
operators.

One module per family, discovered: each defines ``DECOMPOSITIONS`` (op name
-> a function of ATen operations) and may define ``register(litert_torch)``
for lowerings. A family without a module here converts by its Inductor
decomposition (customops.inductor), which is ATen operations already; it
needs a module only for a lowering of its own or where litert-torch cannot
convert what that decomposition uses. litert-torch 0.10 supports torch 2.4 to 2.14; with another
torch, :func:`require_supported_torch` says so.
"""

from __future__ import annotations

import logging
import sys
from typing import Optional

import torch

from .._families import family_modules, short_name, synthesized
from .._import_hook import when_imported

__all__ = ["install", "is_registered", "require_supported_torch", "SUPPORTED_TORCH"]

_log = logging.getLogger("customops.litert")

# The torch releases litert-torch's current release (0.10) installs with: torch>=2.4,<2.15.
SUPPORTED_TORCH = ((2, 4), (2, 15))

# Set when the registration failed (a litert-torch whose internals moved), and why.
error: Optional[BaseException] = None
_registered = False


def families():
    """The family modules of this package (every module not starting with '_'), with one made from the Inductor
    decomposition of each family that has none here."""
    own = family_modules(__name__, __path__)
    names = {short_name(m) for m in own}
    from .. import inductor

    made = [sys.modules.get(f"{__name__}.{short_name(f)}")
            or synthesized(__name__, f, DECOMPOSITIONS={k: d for k, d in f.DECOMPOSITIONS.items()
                                                        if k.partition(".")[0] == f.OP})  # forward overloads
            for f in inductor.families() if short_name(f) not in names]
    return sorted(own + made, key=short_name)


def require_supported_torch(version: Optional[str] = None) -> None:
    """Raises with the way out when this torch is outside litert-torch's range."""
    version = version or torch.__version__
    major_minor = tuple(int(p) for p in version.split("+")[0].split(".")[:2])
    low, high = SUPPORTED_TORCH
    if not low <= major_minor < high:
        raise RuntimeError(
            f"customops.litert: litert-torch 0.10 supports torch {low[0]}.{low[1]} to {high[0]}.{high[1] - 1}, "
            f"this is torch {version}. Convert through ONNX instead: customops.deploy.check(model, args, "
            f"runtime='tflite') (onnx2tf), or use a customops build for a torch in that range.")


def _register(litert_torch=None) -> None:
    global error, _registered
    try:
        require_supported_torch()
        from litert_torch import fx_infra

        from .. import inductor

        for family in families():
            for name, decomposition in family.DECOMPOSITIONS.items():
                op = inductor.overload(name)
                # Forced: litert-torch then calls it for every node of the op, whatever torch's own tables say.
                fx_infra.decomp.add_pre_convert_decomp(op, fx_infra.annotate_force_decomp(_own(decomposition)))
            if hasattr(family, "register"):
                family.register()
        _registered, error = True, None
    except Exception as e:  # importing litert_torch must not fail because of customops
        error = e
        _log.warning("customops.litert: the customops operators were not registered with litert-torch "
                     "(%s: %s); litert_torch.convert will stop at them", type(e).__name__, e)


def _own(function):
    """A function object of its own (annotate_force_decomp marks the object it is given)."""
    return lambda *args, **kwargs: function(*args, **kwargs)


def is_registered() -> bool:
    """Whether litert-torch has been imported and knows every customops operator."""
    return _registered


def install() -> None:
    """Registers with litert-torch when it is first imported (now, if it already is)."""
    when_imported("litert_torch", _register)
