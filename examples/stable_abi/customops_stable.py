"""Loads the stable-ABI quick_gelu prototype and adds, in Python, what its C++ side cannot.

The stable C++ API registers schemas and CPU/CUDA kernels only: it has no autograd
(torch::autograd::Function is libtorch C++) and no fake-tensor kernels. Both are
registered here through torch.library, which is stable Python API in every torch
the binary loads into.

The library comes from $CUSTOMOPS_STABLE_LIB, else <repo>/build-stable-abi, where
check.sh builds it.
"""

import os
from pathlib import Path

import torch

LIBRARY_ENV = "CUSTOMOPS_STABLE_LIB"
ALPHA = 1.702
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def library_path() -> str:
    path = os.environ.get(LIBRARY_ENV)
    if path:
        return path
    return str(Path(__file__).resolve().parents[2] / "build-stable-abi" / "libcustomops_stable.so")


torch.ops.load_library(library_path())
ops = torch.ops.customops_stable


# Fake kernels: the output's metadata without running anything, for torch.compile
# and torch.export. torch.empty_like(x) is what the C++ kernels allocate, so the
# strides agree (x's own when x is dense, a dense layout otherwise). The checks
# mirror the C++ ones, so a bad call fails at trace time too.
@torch.library.register_fake("customops_stable::quick_gelu")
def _quick_gelu_fake(x):
    torch._check(x.dtype in FLOATING, lambda: f"customops_stable::quick_gelu: expected x to be a floating-point "
                                              f"tensor (float16, bfloat16, float32 or float64), got {x.dtype}")
    return torch.empty_like(x)


@torch.library.register_fake("customops_stable::quick_gelu_backward")
def _quick_gelu_backward_fake(grad_out, x):
    torch._check(x.dtype in FLOATING, lambda: f"customops_stable::quick_gelu_backward: expected x to be a "
                                              f"floating-point tensor, got {x.dtype}")
    torch._check(grad_out.dtype == x.dtype, lambda: f"customops_stable::quick_gelu_backward: expected grad_out to "
                                                    f"have the dtype of x ({x.dtype}), got {grad_out.dtype}")
    torch._check(grad_out.shape == x.shape, lambda: f"customops_stable::quick_gelu_backward: expected grad_out to "
                                                    f"have the shape of x {list(x.shape)}, got {list(grad_out.shape)}")
    return torch.empty_like(x)


# Autograd. The backward calls the backward op, which has autograd of its own, so
# second derivatives work as they do with the full library's C++ autograd.
def _quick_gelu_setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _quick_gelu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return ops.quick_gelu_backward(grad, x)


torch.library.register_autograd("customops_stable::quick_gelu", _quick_gelu_backward,
                                setup_context=_quick_gelu_setup_context)


def _quick_gelu_backward_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


# With s = sigmoid(a x): f'(x) = s (1 + a x (1 - s)) and f''(x) = a s (1 - s) (2 + a x (1 - 2 s)).
# quick_gelu_backward(g, x) = g f'(x), so its gradients are gg f'(x) for g and gg g f''(x) for x;
# written in torch ops so that higher derivatives keep working.
def _quick_gelu_backward_backward(ctx, gg):
    grad_out, x = ctx.saved_tensors
    s = torch.sigmoid(ALPHA * x)
    f2 = ALPHA * s * (1 - s) * (2 + ALPHA * x * (1 - 2 * s))
    return ops.quick_gelu_backward(gg, x), gg * grad_out * f2


torch.library.register_autograd("customops_stable::quick_gelu_backward", _quick_gelu_backward_backward,
                                setup_context=_quick_gelu_backward_setup_context)


def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(1.702 x), computed by the stable-ABI kernels."""
    return ops.quick_gelu(x)
