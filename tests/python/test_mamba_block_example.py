"""The Mamba-style block of examples/mamba_block/: it trains (gradients reach every parameter), prefill then decode
equals its forward, its decoding step compiles whole and exports with the state a mutated buffer, and lowers to an
ExecuTorch program whose runtime carries the state from step to step as eager PyTorch does."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch

import customops

pytestmark = pytest.mark.torch_dependent

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mamba_block"))
try:
    import mamba_block  # noqa: E402
finally:
    sys.path.pop(0)


def _block(batch=2):
    torch.manual_seed(0)
    return mamba_block.MambaStyleBlock(d_model=8, d_inner=12, d_conv=4, batch=batch)


def test_a_training_step_reaches_every_parameter():
    block = _block()
    x = torch.randn(2, 7, 8)
    y, state = block(x)
    assert y.shape == x.shape and state.shape == (2, 12, 3)
    y.square().mean().backward()
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    losses = mamba_block.train(block, steps=3)
    assert all(l == l for l in losses)  # finite, no NaN


@pytest.mark.parametrize("prompt", [1, 4])
def test_prefill_then_decode_equals_forward(prompt):
    block = _block()
    x = torch.randn(2, 9, 8)
    with torch.no_grad():
        full, final = block(x)
    decoded = mamba_block.decode(block, x, prompt)
    torch.testing.assert_close(decoded, full, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(block.conv_state, final, rtol=0, atol=0)


def test_the_decoding_step_compiles_whole():
    torch._dynamo.reset()
    block, twin = _block(), _block()
    x = torch.randn(2, 5, 8)
    step = torch.compile(block.step, fullgraph=True)
    with torch.no_grad():
        for t in range(x.shape[1]):
            torch.testing.assert_close(step(x[:, t]), twin.step(x[:, t]), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(block.conv_state, twin.conv_state, rtol=1e-6, atol=1e-6)


def test_the_forward_and_the_step_export():
    block = _block()
    x = torch.randn(2, 5, 8)
    ep = torch.export.export(block, (x,))
    y, state = ep.module()(x)
    with torch.no_grad():
        want_y, want_state = block(x)
    torch.testing.assert_close(y, want_y)
    torch.testing.assert_close(state, want_state)
    step = mamba_block.export_step(block, x[:, 0])
    assert "block.conv_state" in step.run_decompositions({}).graph_signature.buffers_to_mutate.values()


needs_executorch = pytest.mark.skipif(
    importlib.util.find_spec("executorch") is None or customops.executorch.kernel_library() is None,
    reason="needs executorch and customops' ExecuTorch kernels (libcustomops_executorch.so)")


@needs_executorch
@pytest.mark.parametrize("xnnpack", [False, True], ids=["portable", "xnnpack"])
def test_executorch_decodes_after_a_prefill(xnnpack):
    # The prompt prefilled in PyTorch, the step exported with that state and lowered (the state a mutable buffer of
    # the program, updated by customops' kernel), then a few steps in ExecuTorch's runtime: the whole sequence's
    # forward at each step.
    block = _block(batch=1)
    x = torch.randn(1, 6, 8)
    with torch.no_grad():
        full, _ = block(x)
    block.prefill(x[:, :3])
    got = mamba_block.executorch_steps(mamba_block.export_step(block, x[:, 0]), x[:, 3:], xnnpack)
    torch.testing.assert_close(got, full[:, 3:], rtol=1e-5, atol=1e-5)


def test_the_script(tmp_path):
    import subprocess

    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mamba_block", "mamba_block.py")
    out = subprocess.run([sys.executable, script, "--steps", "2", "--tokens", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "prefill 2 + decode 2: largest difference from the forward" in out.stdout
