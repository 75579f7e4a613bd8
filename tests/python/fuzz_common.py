"""The pieces of test_fuzz.py's calls that op_db's family modules build their valid calls (OpInfo.fuzz_call) with:
reproducible argument tensors and small random windows and images. A module of its own because test_fuzz.py runs
as the fuzz child's __main__: op_db importing it from there would make a second T class that the child's
isinstance checks do not recognise."""

from __future__ import annotations

import math

import torch


def _t(shape, dtype=torch.float32, device="cpu", layout="contiguous", fill="randn", grad=False):
    """A tensor of `shape` in `layout`, values by `fill` (requiring grad where
    `grad` and it can); a call's log line builds its tensors with this, so
    that the line alone reproduces it."""
    shape = tuple(shape)
    numel = math.prod(shape)
    if layout == "expanded" and len(shape) > 0:
        # Stride 0 along the largest dimension: huge shapes cost no memory.
        big = max(range(len(shape)), key=lambda i: shape[i])
        base = list(shape)
        base[big] = 1 if shape[big] > 0 else 0
        return _t(tuple(base), dtype, device, "contiguous", fill, grad).expand(shape)
    if numel > (1 << 24):
        raise _Unbuildable(shape)
    if layout == "noncontiguous" and len(shape) > 0:
        wide = list(shape)
        wide[-1] *= 2
        return _t(tuple(wide), dtype, device, "contiguous", fill, grad)[..., ::2]
    if layout == "transposed" and len(shape) >= 2:
        flipped = list(shape)
        flipped[-1], flipped[-2] = flipped[-2], flipped[-1]
        return _t(tuple(flipped), dtype, device, "contiguous", fill, grad).transpose(-1, -2)
    g = torch.Generator().manual_seed(numel + len(shape))
    if dtype.is_complex:
        x = torch.randn(shape, generator=g, dtype=dtype)
    elif dtype.is_floating_point:
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        if fill == "special" and numel > 0:
            x.view(-1)[:: 3] = float("nan")
            x.view(-1)[1:: 3] = float("inf")
            x.view(-1)[2:: 5] = -1e308
        x = x.to(dtype)
    elif dtype == torch.bool:
        x = torch.randint(0, 2, shape, generator=g).bool()
    else:
        x = torch.randint(-3, 4, shape, generator=g).to(dtype)
    if layout == "channels_last" and len(shape) == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    x = x.to(device)
    return x.requires_grad_() if grad and (dtype.is_floating_point or dtype.is_complex) else x


class _Unbuildable(Exception):
    """A tensor too large to build for real (not a finding: the call is skipped)."""


class T:
    """The recipe of one argument tensor: its repr is the _t(...) call that builds it."""

    def __init__(self, shape, dtype=torch.float32, device="cpu", layout="contiguous", fill="randn"):
        self.shape, self.dtype, self.device, self.layout, self.fill = tuple(shape), dtype, device, layout, fill
        self.grad = False

    def build(self):
        return _t(self.shape, self.dtype, self.device, self.layout, self.fill, self.grad)

    def __repr__(self):
        extra = "" if self.fill == "randn" else f", fill={self.fill!r}"
        extra += ", grad=True" if self.grad else ""
        return f"_t({self.shape!r}, {self.dtype}, {self.device!r}, {self.layout!r}{extra})"


# --- valid calls -----------------------------------------------------------------------


def batched(rng) -> bool:
    """Whether a call's image has a batch dimension. Every op's fuzz_call draws it first, whether it has an image
    or not: the calls each CUSTOMOPS_FUZZ_SEED makes, and so the seeds and calls of earlier reports, stay the same."""
    return rng.random() < 0.8


def _pair(rng, lo, hi):
    return [rng.randint(lo, hi), rng.randint(lo, hi)]


def _window(rng):
    """kernel_size, dilation, padding, stride."""
    return _pair(rng, 1, 3), _pair(rng, 1, 2), _pair(rng, 0, 2), _pair(rng, 1, 3)


def _positions(size, k, d, p, s):
    span = size + 2 * p - d * (k - 1) - 1
    return span // s + 1 if span >= 0 else None


def _image_for(rng, k, d, p, s, batch=True):
    """(N, C, H, W) or (C, H, W) that the window fits, and its (out_h, out_w)."""
    hw = []
    for i in range(2):
        lo = max(1, d[i] * (k[i] - 1) + 1 - 2 * p[i])
        hw.append(rng.randint(lo, lo + 4))
    c = rng.randint(1, 3)
    shape = ([rng.choice([0, 1, 2])] if batch else []) + [c] + hw
    return shape, [_positions(hw[i], k[i], d[i], p[i], s[i]) for i in range(2)]
