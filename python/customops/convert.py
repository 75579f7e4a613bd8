"""customops.convert: swap a model's layers for customops layers that compute the same thing.

A layer is swapped only where the customops module gives PyTorch's numerics for
every input the original accepts; otherwise it is left alone and the report says
why. The new module takes over the old one's parameters, buffers, child modules,
training flag and hook dictionaries, so state_dict keys, optimizers (inplace),
hooks and their handles keep working.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.utils import parametrize

from .modules import Conv2d, DepthwiseConv2d, UpsampleBilinear2d

__all__ = ["ConversionReport", "Skipped", "Swapped", "convert"]

COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric")

_log = logging.getLogger("customops.convert")

# dtypes and device types that customops' kernels are registered for.
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_DEVICE_TYPES = ("cpu", "cuda", "meta")

# Per-instance hook state of nn.Module (torch/nn/modules/module.py, Module.__init__).
_HOOK_ATTRS = (
    "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook",
    "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
    "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
)

# nn.Upsample subclasses whose forward is nn.Upsample's (they only fix mode/align_corners).
_UPSAMPLE_TYPES = (nn.Upsample, nn.UpsamplingBilinear2d, nn.UpsamplingNearest2d)


class Swapped(NamedTuple):
    """A module that :func:`customops.convert` replaced: its qualified ``name``, and the class names of the ``old``
    module and of the ``new`` one."""

    name: str  # qualified name, as in model.named_modules() ("" for the model itself)
    old: str  # class name of the replaced module
    new: str  # class name of its replacement


class Skipped(NamedTuple):
    """A convertible kind of layer that :func:`customops.convert` left alone: its qualified ``name``, its class name
    ``cls``, and the ``reason``."""

    name: str
    cls: str
    reason: str


@dataclass
class ConversionReport:
    """What :func:`convert` did: ``swapped`` lists the replaced modules, ``skipped``
    the convertible kinds of layer (``nn.Conv2d``, ``nn.Upsample`` and their
    subclasses) it left alone, with the reason. ``len(report)`` counts swaps."""

    swapped: List[Swapped] = field(default_factory=list)
    skipped: List[Skipped] = field(default_factory=list)
    #: With ``example_input``: per swapped depthwise layer, what each pass runs on CUDA for that input
    #: (:mod:`customops.backends`): {"forward"|"input_grad"|"weight_grad": "customops"|"pytorch"|...}.
    backends: Dict[str, Dict[str, str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.swapped)

    def __str__(self) -> str:
        lines = [f"customops.convert: swapped {len(self.swapped)} module(s), left {len(self.skipped)} alone"]
        lines += [f"  swapped {name or '(model)'}: {old} -> {new}" for name, old, new in self.swapped]
        lines += [f"  skipped {name or '(model)'} ({cls}): {reason}" for name, cls, reason in self.skipped]
        for name, picks in self.backends.items():
            lines.append(f"  on CUDA {name or '(model)'}: " + ", ".join(f"{p} {c}" for p, c in picks.items()))
        return "\n".join(lines)


def convert(model: nn.Module, *, inplace: bool = False, conv2d: bool = False,
            coordinate_mode: Optional[str] = None, example_input=None,
            return_report: bool = False) -> Union[nn.Module, Tuple[nn.Module, ConversionReport]]:
    """Replaces the layers of ``model`` that customops computes identically.

    - ``nn.Conv2d`` with ``groups == in_channels`` and ``padding_mode='zeros'``
      (any kernel, stride, dilation, channel multiplier, bias, numeric or
      ``'same'``/``'valid'`` padding) becomes :class:`customops.DepthwiseConv2d`;
      with ``conv2d=True`` every other zeros-padded ``nn.Conv2d`` becomes
      :class:`customops.Conv2d`.
    - ``nn.Upsample(mode='bilinear')`` and ``nn.UpsamplingBilinear2d`` become
      :class:`customops.UpsampleBilinear2d` with the coordinate mode of their
      ``align_corners``. Left alone: a ``scale_factor`` that is not a whole number
      (or is below 1) with ``align_corners=False`` and ``recompute_scale_factor``
      unset, since PyTorch then maps coordinates with ``1/scale_factor`` and
      customops with ``in/out``, which differ whenever ``in * scale_factor`` is
      not whole.

    Only exact classes are swapped: a subclass may override ``forward``. Calls
    of ``F.conv2d``/``F.interpolate`` inside a ``forward`` are not modules and
    are not converted.

    Args:
        model: the model (not a ScriptModule: convert before scripting).
        inplace: ``False`` (default) converts a deep copy and leaves ``model``
            untouched; ``True`` swaps the modules inside ``model`` and the new
            modules hold the same ``nn.Parameter`` objects, so an optimizer built
            on ``model.parameters()`` keeps working. Either way use the returned
            model: when ``model`` itself is a convertible layer, it is replaced.
        conv2d: also convert non-depthwise ``nn.Conv2d`` to ``customops.Conv2d``.
        coordinate_mode: ``None`` keeps each resize's numerics. ``"asymmetric"``
            (TF1 ``resize_bilinear(align_corners=False)``), ``"half_pixel"`` or
            ``"align_corners"`` converts every bilinear ``nn.Upsample`` to that
            convention on purpose, a change of numerics (for parity with a
            deployment runtime); the output size stays the same.
        example_input: an input of the model (a tensor, or a tuple of positional arguments); the converted
            model runs it once without gradients, and the report's ``backends`` says, per depthwise layer and
            pass, whether customops' kernels or PyTorch's run on CUDA for inputs of that shape, dtype and
            layout (:mod:`customops.backends`).
        return_report: also return the :class:`ConversionReport` (what was
            swapped, and what was left alone and why). The report is logged at
            INFO level on the ``customops.convert`` logger either way.

    Returns:
        The converted model, as ``nn.SyncBatchNorm.convert_sync_batchnorm`` and
        ``torch.ao.quantization.convert`` do; ``(model, report)`` with
        ``return_report=True``. Parameters, buffers (so device, dtype and memory
        format), training mode, forward/backward/state-dict hooks and state_dict
        keys of each replaced module carry over.

    Example::

        model = customops.convert(torchvision.models.mobilenet_v2())
        model, report = customops.convert(model, conv2d=True, return_report=True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert: expected an nn.Module, got {type(model).__name__}")
    if isinstance(model, torch.jit.ScriptModule):
        raise TypeError("convert: model is a ScriptModule; convert the eager model, then script it")
    if coordinate_mode is not None and coordinate_mode not in COORDINATE_MODES:
        raise ValueError(f"convert: coordinate_mode must be None or one of {COORDINATE_MODES}, "
                         f"got {coordinate_mode!r}")
    if not inplace:
        model = copy.deepcopy(model)
    converter = _Converter(conv2d=bool(conv2d), coordinate_mode=coordinate_mode)
    model = converter.run(model)
    if example_input is not None:
        converter.report.backends = _backends_for(model, example_input)
    _log.info("%s", converter.report)
    return (model, converter.report) if return_report else model


class _Converter:
    def __init__(self, conv2d: bool, coordinate_mode: Optional[str]) -> None:
        self.conv2d = conv2d
        self.coordinate_mode = coordinate_mode
        self.report = ConversionReport()
        # id -> (module, its replacement or itself); keeps both alive so that ids stay
        # unique, and gives a module shared by several parents one replacement.
        self.seen: Dict[int, Tuple[nn.Module, nn.Module]] = {}

    def run(self, model: nn.Module) -> nn.Module:
        return self._visit(model, "")

    def _visit(self, module: nn.Module, name: str) -> nn.Module:
        if id(module) in self.seen:
            return self.seen[id(module)][1]
        new = self._replacement(module, name)
        self.seen[id(module)] = (module, new)
        # A ScriptModule's compiled forward does not read _modules: leave it whole.
        if new is module and not isinstance(module, torch.jit.ScriptModule):
            for child_name, child in list(module._modules.items()):
                if child is None:
                    continue
                new_child = self._visit(child, f"{name}.{child_name}" if name else child_name)
                if new_child is not child:
                    module._modules[child_name] = new_child
        return new

    def _replacement(self, module: nn.Module, name: str) -> nn.Module:
        if isinstance(module, nn.Conv2d):
            new, reason = self._convert_conv(module)
        elif isinstance(module, nn.Upsample):
            new, reason = self._convert_upsample(module)
        else:
            return module
        if new is None:
            self.report.skipped.append(Skipped(name, type(module).__name__, reason))
            return module
        _take_over(new, module)
        self.report.swapped.append(Swapped(name, type(module).__name__, type(new).__name__))
        return new

    def _convert_conv(self, m: nn.Conv2d) -> Tuple[Optional[nn.Module], str]:
        if parametrize.is_parametrized(m):
            return None, "parametrized (torch.nn.utils.parametrize): its weight is computed in forward"
        if isinstance(m, LazyModuleMixin) and m.has_uninitialized_params():
            return None, "lazy module not initialised yet: run a forward first"
        if type(m) is not nn.Conv2d:
            return None, f"subclass of nn.Conv2d ({type(m).__qualname__}): its forward may differ"
        if m.padding_mode != "zeros":
            return None, f"padding_mode={m.padding_mode!r}: only zeros padding converts"
        params = m._parameters
        if not isinstance(params.get("weight"), nn.Parameter) or set(params) - {"weight", "bias"}:
            return None, f"parameters {sorted(params)}, not weight and bias (weight_norm or similar)"
        weight = m.weight
        if weight.dtype not in _DTYPES:
            return None, f"dtype {weight.dtype} has no customops kernel"
        if weight.device.type not in _DEVICE_TYPES:
            return None, f"device {weight.device.type!r} has no customops kernel"
        args = dict(kernel_size=m.kernel_size, stride=m.stride, padding=m.padding, dilation=m.dilation,
                    bias=m.bias is not None, padding_mode=m.padding_mode,
                    # The new module's own parameters are discarded: meta allocates and initialises nothing.
                    device="meta", dtype=weight.dtype)
        if m.groups == m.in_channels:
            return DepthwiseConv2d(m.in_channels, m.out_channels, **args), ""
        if self.conv2d:
            return Conv2d(m.in_channels, m.out_channels, groups=m.groups, **args), ""
        return None, (f"groups={m.groups} is not depthwise (in_channels={m.in_channels}) and conv2d=False")

    def _convert_upsample(self, m: nn.Upsample) -> Tuple[Optional[nn.Module], str]:
        if type(m) not in _UPSAMPLE_TYPES:
            return None, f"subclass of nn.Upsample ({type(m).__qualname__}): its forward may differ"
        if m.mode != "bilinear":
            return None, f"mode={m.mode!r}: only bilinear converts"
        size, scale = m.size, m.scale_factor
        if (size is None) == (scale is None):
            return None, "needs exactly one of size and scale_factor"
        if isinstance(size, (tuple, list)) and (len(size) != 2 or any(s is None for s in size)):
            return None, f"size={size}: bilinear resizes take two sizes"
        if isinstance(scale, (tuple, list)) and len(scale) != 2:
            return None, f"scale_factor={scale}: bilinear resizes take two factors"
        scales = [] if scale is None else [float(s) for s in (scale if isinstance(scale, (tuple, list)) else (scale,))]
        if any(not s > 0 for s in scales):
            return None, f"scale_factor={scale} is not positive"
        mode = self.coordinate_mode
        if mode is None:
            mode = "align_corners" if m.align_corners else "half_pixel"
            # align_corners maps with (in-1)/(out-1) whatever the scale; half_pixel
            # with 1/scale_factor unless recompute_scale_factor, customops with in/out.
            if (mode == "half_pixel" and scales and not getattr(m, "recompute_scale_factor", None)
                    and any(not (s.is_integer() and s >= 1) for s in scales)):
                return None, (f"scale_factor={scale} is not a whole number and recompute_scale_factor is not "
                              "set: PyTorch maps coordinates with 1/scale_factor, customops with in/out")
        return UpsampleBilinear2d(size=size, scale_factor=scale, coordinate_mode=mode,
                                  recompute_scale_factor=getattr(m, "recompute_scale_factor", None)), ""


def _backends_for(model: nn.Module, example_input) -> Dict[str, Dict[str, str]]:
    from .backends import describe_depthwise

    found: Dict[str, Dict[str, str]] = {}
    handles = []
    for name, module in model.named_modules():
        if type(module) is DepthwiseConv2d:
            def hook(mod, args, name=name):
                x = mod._pad(args[0])
                found[name] = describe_depthwise(x, mod.weight, mod.bias is not None, mod.stride, mod._conv_padding,
                                                 mod.dilation)
            handles.append(module.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            model(*(example_input if isinstance(example_input, tuple) else (example_input,)))
    finally:
        for h in handles:
            h.remove()
    return found


def _take_over(new: nn.Module, old: nn.Module) -> None:
    """Gives ``new`` the state of ``old``: the same Parameter, buffer and child
    objects under the same names (so state_dict keys and optimizers carry over),
    the training flag, and the hook dictionaries themselves, so that handles
    returned by ``old.register_*_hook`` still remove the hooks."""
    for attrs in (old._parameters, old._buffers, old._modules):
        for key in attrs:
            # Our modules keep bias=None as a plain attribute; nn.Conv2d registers it.
            new.__dict__.pop(key, None)
    state = new.__dict__  # not setattr: nn.Module.__setattr__ would file Parameters and Modules
    state["_parameters"] = dict(old._parameters)
    state["_buffers"] = dict(old._buffers)
    state["_non_persistent_buffers_set"] = set(old._non_persistent_buffers_set)
    state["_modules"] = dict(old._modules)
    state["training"] = old.training
    for attr in _HOOK_ATTRS:
        if attr in old.__dict__:
            hooks = old.__dict__[attr]
            if isinstance(hooks, dict):
                _rebind_hooks(hooks, old, new)
            state[attr] = hooks


def _rebind_hooks(hooks: dict, old: nn.Module, new: nn.Module) -> None:
    # Hooks registered "with module" (e.g. register_load_state_dict_pre_hook) hold a
    # weak reference to their module; point them at the module now in the model.
    wrapped_type = nn.modules.module._WrappedHook
    for key, hook in list(hooks.items()):
        if isinstance(hook, wrapped_type) and hook.with_module and hook.module() is old:
            hooks[key] = wrapped_type(hook.hook, new)
