"""A pointwise family for ExecuTorch: its formulas in core ATen operations (XNNPACK runs them), and customops'
kernel, the op's out variant (kernels/executorch/pointwise.h, the CPU kernels' formulas and vector loop, written for
every pointwise family by cmake/CustomopsPointwise.cmake)."""

from __future__ import annotations

from types import ModuleType

import torch

from .._families import short_name, synthesized
from ..inductor._pointwise import forward_of

# What the kernel takes (kernels/executorch/pointwise.h): float64's vector exp is Sleef's, which only libtorch links.
_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Measured (docs/deploy.md): alone the kernel takes 0.76-0.93 of the delegated formulas' time, between linear layers
# about the same as them (a SwiGLU MLP: 1.00); an activation of a convolutional network left to it splits
# XNNPACK's partition between the convolutions around it, which cost more than it saved (the segmentation network
# with every quick_gelu on the kernel: 1.08-1.11). So calls on 4-D tensors, the convolutions' activations, are
# decomposed.
DEFAULT_ROUTE = "kernel"


def takes_kernel(*tensors) -> bool:
    """Whether customops' kernel runs this call: tensors of one kernel dtype and shape, in the default dim order
    (channels_last tensors keep theirs in ExecuTorch's programs)."""
    first = tensors[0]
    return all(isinstance(t, torch.Tensor) and t.dtype == first.dtype and t.shape == first.shape
               and t.is_contiguous() for t in tensors) and first.dtype in _KERNEL_DTYPES


def uses_kernel(*tensors) -> bool:
    """Whether a call on the kernel route takes customops' kernel: one it runs, on tensors that are not a
    convolutional network's 4-D activations."""
    return takes_kernel(*tensors) and tensors[0].dim() != 4


def family(formulas: ModuleType) -> ModuleType:
    name, n = short_name(formulas), len(formulas.INPUTS)
    return synthesized(__package__, formulas, DECOMPOSITIONS={name: forward_of(formulas)},
                       KERNELS={name: DEFAULT_ROUTE},
                       KERNEL_WHEN={name: lambda *args: uses_kernel(*args[:n])})  # the tensors, not the scalars
