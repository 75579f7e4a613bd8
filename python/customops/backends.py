"""customops.backends: which implementation a customops op runs on CUDA where PyTorch has a competing kernel.

``customops.depthwise_conv2d`` on CUDA runs each pass (forward, input gradient, weight and bias gradients)
with customops' kernels or with PyTorch's convolution (cuDNN or its native depthwise kernels):

- ``"auto"`` (default): the faster for the call's shape, dtype and layout, by a rule measured on the
  depthwise layers of the timm model zoo (docs/performance/depthwise_choice.md); while
  ``torch.backends.cudnn.benchmark`` is on, by timing both the first time a shape comes (as cuDNN's
  benchmark mode does; kept for the process, see :func:`timed`). Under
  ``torch.use_deterministic_algorithms(True)`` nothing is timed: the rule decides, and both implementations
  run deterministic kernels (customops' reduce in a fixed order, PyTorch's cuDNN calls take deterministic
  algorithms).
- ``"customops"`` or ``"pytorch"``: always that one (PyTorch's where it takes the call at all; an empty
  batch stays with customops).

``customops.upsample_bilinear2d`` on CUDA runs each pass (forward, backward) with customops' kernels or with
PyTorch's (``F.interpolate``'s kernel and its backward) under the same three policies, by a rule measured over
resize shapes (docs/performance/upsample_choice.md) or timed in benchmark mode. PyTorch's kernels take the
``half_pixel`` and ``align_corners`` conventions, not ``asymmetric``, and their backward adds atomically in the
gradient's dtype: under deterministic algorithms, and for upscales in float16 and bfloat16 (whose many additions
per input would lose bits), the backward stays with customops' kernel, whatever the policy.

CPU calls always run customops' kernels. Results are the same up to rounding whichever runs, in the same
layout.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Dict, Iterator, List, Sequence

import torch

__all__ = ["clear_timed", "depthwise_conv2d_rule", "get", "ops", "set", "timed", "upsample_bilinear2d_rule", "use"]

_PASSES = ("forward", "input_grad", "weight_grad")
_UPSAMPLE_PASSES = ("forward", "backward")


def _lib():
    return torch.ops.customops_backends


def ops() -> List[str]:
    """The ops that have a choice of implementation."""
    return list(_lib().ops())


def get(op: str) -> str:
    """The policy of ``op``: ``"auto"``, ``"customops"`` or ``"pytorch"``."""
    return _lib().get(op)


def set(op: str, backend: str) -> None:  # noqa: A001  (the module's verb, as torch.backends' flags)
    """Sets the policy of ``op`` for the whole process: ``"auto"``, ``"customops"`` or ``"pytorch"``."""
    _lib().set(op, backend)
    if "torch._dynamo" in sys.modules:  # compiled graphs trace the policy: their cache keys take it
        from .inductor import _cache_key

        _cache_key.refresh()


@contextlib.contextmanager
def use(op: str, backend: str) -> Iterator[None]:
    """Runs the block with ``op``'s policy set to ``backend``, then restores the previous one."""
    previous = get(op)
    set(op, backend)
    try:
        yield
    finally:
        set(op, previous)


def timed() -> Dict[str, str]:
    """The choices timed so far in benchmark mode: shape key -> ``"customops"`` or ``"pytorch"``."""
    return dict(entry.rsplit("=", 1) for entry in _lib().timed())


def clear_timed() -> None:
    """Forgets the timed choices (the next call of each shape times again in benchmark mode)."""
    _lib().clear_timed()


def depthwise_conv2d_rule(input_size: Sequence[int], weight_size: Sequence[int], dtype: torch.dtype,
                          channels_last: bool = False, bias: bool = False, stride: Sequence[int] = (1, 1),
                          padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1)) -> Dict[str, str]:
    """What the ``"auto"`` rule runs for a CUDA call of ``depthwise_conv2d`` with these arguments, per pass
    (``forward``, ``input_grad``, ``weight_grad``): ``"customops"`` or ``"pytorch"``. A forced policy
    (:func:`set`) and timed choices (benchmark mode) override it."""
    picks = _lib().depthwise_conv2d_rule(list(input_size), list(weight_size), dtype, bool(channels_last), bool(bias),
                                         _pair(stride), _pair(padding), _pair(dilation))
    return dict(zip(_PASSES, picks))


def upsample_bilinear2d_rule(input_size: Sequence[int], output_size: Sequence[int], dtype: torch.dtype,
                             channels_last: bool = False, coordinate_mode: str = "half_pixel") -> Dict[str, str]:
    """What the ``"auto"`` rule runs for a CUDA call of ``upsample_bilinear2d`` resizing an input of
    ``input_size`` (N, C, H, W) to ``output_size`` (H, W), per pass (``forward``, ``backward``):
    ``"customops"`` or ``"pytorch"``. A forced policy (:func:`set`) and timed choices (benchmark mode) override
    it; the ``asymmetric`` convention, the backward under deterministic algorithms and the half types' backward
    upscales are always customops'."""
    picks = _lib().upsample_bilinear2d_rule([int(s) for s in input_size], [int(s) for s in output_size], dtype,
                                            bool(channels_last), coordinate_mode)
    return dict(zip(_UPSAMPLE_PASSES, picks))


def _pair(v) -> List[int]:
    return [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]


def describe_depthwise(input: torch.Tensor, weight: torch.Tensor, bias: bool, stride, padding,
                       dilation) -> Dict[str, str]:
    """Per pass, what a CUDA call with tensors of these shapes, dtype and layout runs now, wherever they are
    (policy, then benchmark mode, then the rule)."""
    policy = get("depthwise_conv2d")
    if policy != "auto":
        return dict.fromkeys(_PASSES, policy)
    rule = depthwise_conv2d_rule(input.shape, weight.shape, input.dtype,
                                 input.dim() == 4 and input.is_contiguous(memory_format=torch.channels_last)
                                 and not input.is_contiguous(), bias, stride, padding, dilation)
    if torch.backends.cudnn.benchmark and not torch.are_deterministic_algorithms_enabled():
        return {p: f"timed at the first call (rule: {c})" for p, c in rule.items()}
    return rule
