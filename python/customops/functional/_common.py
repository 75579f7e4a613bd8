"""What the family modules' functions share: argument checks and the docs' lines (@_overview)."""

from __future__ import annotations

from typing import Tuple

import torch
from torch._jit_internal import BroadcastingList2


def _int_pair(v: BroadcastingList2[int]) -> list[int]:
    """(height, width) from an int or a pair. int() specialises the values when
    torch.compile(dynamic=True) made them symbolic: window parameters are
    configuration, not shapes, and the schemas take them as int[2]."""
    if isinstance(v, int):
        return [int(v), int(v)]
    return [int(e) for e in v]


def _is_int(v) -> bool:
    # torch.compile(dynamic=True) hands symbolic ints to the wrappers.
    return isinstance(v, (int, torch.SymInt))


def _overview(text: str, layouts: Tuple[str, str, str]):
    """Attaches the op's lines in the generated tables of the docs (MyST Markdown) to the function: ``text``, its
    line in the operator table (``overview``), and ``layouts``, what it does with NCHW and with channels_last inputs
    and the memory format of its result (the table of docs/guide/memory_formats.md). The docs build reads them
    there, so a new op's lines come with its function."""

    def attach(function):
        function.overview = text
        function.layouts = layouts
        return function

    return attach


_NO_PADDING = object()


def _check_args(op: str, tensors=(), pairs=(), optional=(), padding=_NO_PADDING) -> None:
    """The wrappers' own arguments checked in eager mode and under torch.compile (TorchScript's types check them,
    and leave this out: it is only called under `not torch.jit.is_scripting()`), so that a wrong type fails with
    the argument's name rather than with a TypeError, IndexError or AttributeError of the code that reads it.
    tensors: (name, value, least dimensions) where the wrapper reads the tensor's shape; pairs: (name, value) of
    int-or-pair arguments, `optional` ones also None; padding: a convolution's. A pair of another length fails
    with the op's own message, before the wrapper indexes it."""
    for name, t, dims in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"customops.{op}: expected {name} to be a tensor, got {type(t).__name__}")
        if t.dim() < dims:
            raise RuntimeError(f"customops::{op}: expected {name} to be a 4-D tensor, got {t.dim()}-D")
    for name, v in [*pairs, *((n, v) for n, v in optional if v is not None)]:
        if _is_int(v):
            continue
        if not isinstance(v, (list, tuple)) or not all(_is_int(e) for e in v):
            raise TypeError(f"customops.{op}: expected {name} to be an int or a pair of ints, got {v!r}")
        if len(v) != 2:
            raise RuntimeError(f"customops::{op}: expected {name} to have 2 elements (height, width), got {len(v)}")
    if padding is not _NO_PADDING and not isinstance(padding, str) and not _is_int(padding):
        if not isinstance(padding, (list, tuple)) or len(padding) != 2 or not all(_is_int(e) for e in padding):
            raise TypeError(f"customops.{op}: expected padding to be an int, a pair of ints, 'same' or 'valid', "
                            f"got {padding!r}")
