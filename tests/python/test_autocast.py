"""A mixed-precision training step through every customops layer: under
torch.autocast the model trains like the same model built from PyTorch's own
layers (same dtypes, close values), its float32 parameters get float32
gradients, and torch.compile gives the eager step's results."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import customops
from conftest import requires_cuda
from op_db.trilinear import _trilinear_ref

pytestmark = pytest.mark.torch_dependent


class Net(nn.Module):
    """conv -> QuickGELU -> depthwise conv -> bilinear x2 -> im2col/col2im ->
    pool, plus a NeRF-style branch: trilinear interpolation of features
    produced by a Linear layer (low-precision under autocast) at float32 points."""

    def __init__(self, custom: bool, features: int = 6) -> None:
        super().__init__()
        self.custom = custom
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 16, 5, padding=2, groups=8)
        self.embed = nn.Parameter(torch.randn(2, 5))  # one feature cell per image
        self.to_feats = nn.Linear(5, 8 * features)
        self.head = nn.Linear(16 + features, 4)

    def forward(self, x: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        if self.custom:
            y = customops.conv2d(x, self.conv.weight, self.conv.bias, padding=1)
            y = customops.quick_gelu(y)
            y = customops.depthwise_conv2d(y, self.dw.weight, self.dw.bias, padding=2)
            y = customops.upsample_bilinear2d(y, (2 * y.shape[-2], 2 * y.shape[-1]))
            cols = customops.im2col(y, (2, 2), stride=(2, 2))
            y = customops.col2im(cols, y.shape[-2:], (2, 2), stride=(2, 2))
        else:
            y = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1)
            y = y * torch.sigmoid(1.702 * y)
            y = F.conv2d(y, self.dw.weight, self.dw.bias, padding=2, groups=8)
            y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            cols = F.unfold(y, (2, 2), stride=(2, 2))
            y = F.fold(cols, y.shape[-2:], (2, 2), stride=(2, 2))
        pooled = y.mean((2, 3))
        feats = self.to_feats(self.embed).view(-1, 8, self.to_feats.out_features // 8)
        if self.custom:
            interp = customops.trilinear_interpolation(feats, points)
        else:
            interp = _trilinear_ref(feats, points)
        return self.head(torch.cat([pooled, interp.to(pooled.dtype)], 1))


def _step(model: Net, x, points, device, low):
    model.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=low):
        out = model(x, points)
    loss = out.float().square().mean()
    loss.backward()
    return out, loss, {n: p.grad for n, p in model.named_parameters()}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


@pytest.mark.parametrize("device,low", [
    ("cpu", torch.bfloat16),
    pytest.param("cuda", torch.float16, marks=requires_cuda),
    pytest.param("cuda", torch.bfloat16, marks=requires_cuda),
])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "channels_last"])
def test_training_step_under_autocast(device, low, channels_last):
    torch.manual_seed(0)
    ours, theirs = Net(True).to(device), Net(False).to(device)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 3, 10, 12, device=device)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    points = torch.rand(2, 3, device=device) * 2 - 1

    out, loss, grads = _step(ours, x, points, device, low)
    ref_out, ref_loss, ref_grads = _step(theirs, x, points, device, low)
    assert out.dtype == ref_out.dtype == low  # the head is a Linear: autocast's dtype
    # Both run in the low dtype; their rounding differs, so compare as bf16/fp16 computations do.
    tol = 3e-2 if low == torch.bfloat16 else 5e-3
    assert _rel(loss, ref_loss) < tol
    for name, g in grads.items():
        assert g is not None and g.dtype == torch.float32, name
        assert torch.isfinite(g).all(), name
        assert _rel(g, ref_grads[name]) < 3 * tol, name

    # One optimizer step moves the float32 parameters like the reference's.
    for model in (ours, theirs):
        torch.optim.SGD(model.parameters(), lr=0.1).step()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        assert p.dtype == torch.float32 and _rel(p, q) < tol, name

    # torch.compile of the same step gives the eager step's results.
    torch._dynamo.reset()
    compiled = torch.compile(ours, fullgraph=True)
    c_out, c_loss, c_grads = _step(compiled, x, points, device, low)
    e_out, e_loss, e_grads = _step(ours, x, points, device, low)
    assert c_out.dtype == e_out.dtype
    assert _rel(c_loss, e_loss) < tol
    for (name, g), e in zip(c_grads.items(), e_grads.values()):  # compiled names carry a prefix
        assert g.dtype == torch.float32 and _rel(g, e) < 3 * tol, name
