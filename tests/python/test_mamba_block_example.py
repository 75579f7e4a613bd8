"""The Mamba-style block of examples/mamba_block/: it trains (gradients reach every parameter), prefill then decode
equals its forward, its decoding step compiles whole and exports with the state a mutated buffer, and lowers to an
ExecuTorch program whose runtime carries the state from step to step as eager PyTorch does (customops.deploy.check
over several calls)."""

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
    # The state holds in_proj's outputs, which a GEMM of one step rounds differently from one of nine on some CPUs
    # (the last bit of float32): equal within it, not bit for bit.
    torch.testing.assert_close(block.conv_state, final, rtol=1e-6, atol=1e-6)


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
def test_executorch_decodes_after_a_prefill(tmp_path):
    # The prompt prefilled in PyTorch, then three tokens checked by customops.deploy.check: the step's program (with
    # XNNPACK and without) starts from the prefill's state and carries it from call to call, each call's output and
    # the final state against eager steps.
    from customops.deploy.pte import execute_calls

    block = _block(batch=1)
    x = torch.randn(1, 6, 8)
    with torch.no_grad():
        full, _ = block(x)
    block.prefill(x[:, :3])
    state = block.conv_state.clone()
    report = mamba_block.check_executorch(block, x[:, 3:], save_pte=str(tmp_path / "step.pte"))
    assert report.ok and report.calls == 3, report
    assert set(report.state) == {"block.conv_state"} and report.state["block.conv_state"] <= 1e-5, report
    assert {p.op: p.onnx for p in report.ops}["customops.causal_conv1d.update"] == \
        "customops kernel (causal_conv1d.update_out)", report
    for lowering in ("xnnpack", "portable"):  # the update on customops' kernel
        assert report.pte_operators[lowering].get("customops::causal_conv1d") == 1, report.pte_operators
    torch.testing.assert_close(block.conv_state, state, rtol=0, atol=0)  # the check leaves the block as it was
    # The saved program, the one to deploy, decodes the rest of the sequence from the prefill as the forward does.
    outputs, _ = execute_calls((tmp_path / "step.pte").read_bytes(), [[x[:, t].contiguous()] for t in range(3, 6)])
    torch.testing.assert_close(torch.stack([o[0] for o in outputs], dim=1), full[:, 3:], rtol=1e-5, atol=1e-5)


@needs_executorch
def test_a_program_without_the_prefill_fails(monkeypatch):
    # ExecuTorch's default for a mutated buffer, its shape alone: the program would decode without the prompt.
    from executorch.exir.pass_base import ExportPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    monkeypatch.setattr(InitializedMutableBufferPass, "placeholder", ExportPass.placeholder)
    block = _block(batch=1)
    x = torch.randn(1, 6, 8)
    block.prefill(x[:, :3])
    report = mamba_block.check_executorch(block, x[:, 3:])
    assert not report.ok and report.outputs[0] > 1e-3, report


def test_the_script(tmp_path):
    import subprocess

    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mamba_block", "mamba_block.py")
    out = subprocess.run([sys.executable, script, "--steps", "2", "--tokens", "2", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "prefill 2 + decode 2: largest difference from the forward" in out.stdout
