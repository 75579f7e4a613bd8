"""Blocks of real models in which one customops op replaces the PyTorch code such models are written with,
for the model benchmark (``python -m customops.benchmark.models --models clip_mlp,swiglu_mlp,decoder,nerf_field``).

Each block is built twice with the same weights: the original, as the model's authors wrote it in plain
PyTorch, and the customops version. ``customops.convert`` has nothing to swap here (the originals are
expressions, not ``nn.Module`` layers it recognises), so each block says what it replaced.

- CLIP's MLP (ViT-B/16): Linear 768 -> 3072, QuickGELU written as ``x * torch.sigmoid(1.702 * x)``,
  Linear 3072 -> 768, on (batch, 197 tokens, 768).
- A SwiGLU MLP (Llama's, at width 1024): ``w2(F.silu(w1(x)) * w3(x))``, hidden width 2816, on (batch, 512
  tokens, 1024).
- A decoder stage: bilinear x2 (``nn.Upsample``), ReLU, 3x3 convolution, 128 channels at 64x64.
- A NeRF field: a dense grid of 32 features, 8 corners gathered per point and blended trilinearly (written
  out as in NeRF codebases), then a small MLP; the input is a batch of points.
- Mamba's mixer around its short convolution (Mamba-130M's widths, the selective scan left out): Linear 768 ->
  1536, the causal depthwise convolution of width 4 written as Mamba does without its fused kernel
  (``nn.Conv1d(padding=3)`` and the last 3 steps dropped), SiLU, Linear 1536 -> 768, on (batch, 2048 steps, 768).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

import customops


class QuickGELURef(nn.Module):
    """CLIP's QuickGELU, as in the original code."""

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(1.702 * x)


class ClipMLP(nn.Module):
    def __init__(self, act: nn.Module, width: int = 768) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = act
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class SiluMulRef(nn.Module):
    """SwiGLU's gate, as Llama's code writes it."""

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        return nn.functional.silu(a) * b


class SwiGLUMLP(nn.Module):
    def __init__(self, gate: nn.Module, width: int = 1024, hidden: int = 2816) -> None:
        super().__init__()
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)
        self.gate = gate
        self.w2 = nn.Linear(hidden, width, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.gate(self.w1(x), self.w3(x)))


class Decoder(nn.Module):
    def __init__(self, up: nn.Module, channels: int = 128) -> None:
        super().__init__()
        self.up = up
        self.act = nn.ReLU()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(self.act(self.up(x)))


def trilinear_ref(feats: Tensor, points: Tensor) -> Tensor:
    """Trilinear blending as NeRF codebases write it: feats (N, 8, F), points (N, 3) in [-1, 1]."""
    u, v, w = ((points + 1) / 2).unbind(-1)
    u, v, w = u[:, None], v[:, None], w[:, None]
    f = feats.unbind(1)
    return ((1 - u) * ((1 - v) * ((1 - w) * f[0] + w * f[1]) + v * ((1 - w) * f[2] + w * f[3]))
            + u * ((1 - v) * ((1 - w) * f[4] + w * f[5]) + v * ((1 - w) * f[6] + w * f[7])))


class NerfField(nn.Module):
    """Points (N, 3) in [0, 1)^3 -> (N, 4): grid features interpolated trilinearly, then an MLP."""

    def __init__(self, interpolate, resolution: int = 64, features: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.interpolate = interpolate
        self.resolution = resolution
        self.grid = nn.Parameter(torch.randn(resolution + 1, resolution + 1, resolution + 1, features) * 0.1)
        self.mlp = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 4))
        corners = torch.tensor([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)])
        self.register_buffer("corners", corners, persistent=False)

    def forward(self, points: Tensor) -> Tensor:
        scaled = points * self.resolution
        cell = scaled.floor().clamp(0, self.resolution - 1)
        local = (scaled - cell) * 2 - 1  # [-1, 1] within the cell
        index = cell.long()[:, None, :] + self.corners  # (N, 8, 3)
        feats = self.grid[index[..., 0], index[..., 1], index[..., 2]]  # (N, 8, F)
        return self.mlp(self.interpolate(feats, local.to(feats.dtype)))


def mamba_conv_ref(h: Tensor, conv: nn.Conv1d) -> Tensor:
    """Mamba's short convolution without its fused kernel: padded on both sides, the padded tail dropped."""
    return conv(h)[..., :h.shape[-1]]


def mamba_conv_ours(h: Tensor, conv: nn.Conv1d) -> Tensor:
    return customops.causal_conv1d(h, conv.weight, conv.bias)


class MambaConv(nn.Module):
    """(batch, steps, width) -> the same: in_proj, the causal depthwise convolution over the steps, SiLU,
    out_proj. The convolution's parameters are one nn.Conv1d either way (weights shared by state dict)."""

    def __init__(self, convolve, width: int = 768, kernel: int = 4) -> None:
        super().__init__()
        inner = 2 * width
        self.convolve = convolve
        self.in_proj = nn.Linear(width, inner)
        self.conv1d = nn.Conv1d(inner, inner, kernel, groups=inner, padding=kernel - 1)
        self.out_proj = nn.Linear(inner, width)

    def forward(self, x: Tensor) -> Tensor:
        h = self.convolve(self.in_proj(x).transpose(1, 2), self.conv1d)
        return self.out_proj(nn.functional.silu(h).transpose(1, 2))


def clip_mlp(original: bool) -> nn.Module:
    return ClipMLP(QuickGELURef() if original else customops.QuickGELU())


def swiglu_mlp(original: bool) -> nn.Module:
    return SwiGLUMLP(SiluMulRef() if original else customops.SiluMul())


def decoder(original: bool) -> nn.Module:
    up = (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False) if original
          else customops.UpsampleBilinear2d(scale_factor=2))
    return Decoder(up)


def nerf_field(original: bool) -> nn.Module:
    return NerfField(trilinear_ref if original else customops.trilinear_interpolation)


def mamba_conv(original: bool) -> nn.Module:
    return MambaConv(mamba_conv_ref if original else mamba_conv_ours)


# name -> (builder, "module-name original replacement": what the customops version replaced)
BLOCKS = {
    "clip_mlp": (clip_mlp, "gelu QuickGELURef QuickGELU"),
    "swiglu_mlp": (swiglu_mlp, "gate SiluMulRef SiluMul"),
    "decoder": (decoder, "up Upsample UpsampleBilinear2d"),
    "nerf_field": (nerf_field, "interpolate trilinear_ref trilinear_interpolation"),
    "mamba_conv": (mamba_conv, "convolve mamba_conv_ref causal_conv1d"),
}


def pair(name: str) -> tuple[nn.Module, nn.Module, str]:
    """The original block, the customops one with the same weights, and what was replaced (the replaced
    module's name, the original's class or function and the customops one's)."""
    build, replaced = BLOCKS[name]
    original = build(True)
    ours = build(False)
    ours.load_state_dict(original.state_dict())
    return original, ours, replaced
