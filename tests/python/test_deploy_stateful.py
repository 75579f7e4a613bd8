"""customops.deploy.check on models with state (buffers their forward updates in place): in ExecuTorch over a
sequence of calls, one loaded program carrying the state from the model's values at the check; in ONNX Runtime,
which keeps no state, reported unsupported."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import customops  # noqa: F401  (the ops)
import customops.deploy

pytestmark = pytest.mark.torch_dependent

needs_executorch = pytest.mark.skipif(importlib.util.find_spec("executorch") is None,
                                      reason="needs executorch (requirements/torch-2.15.txt)")


class Accumulator(torch.nn.Module):
    """A decaying running sum kept in a buffer: each call's output reads the state the calls before it left, so a
    program that starts from another state, or does not carry it, differs at once. With ``drift``, eager PyTorch
    updates the state differently from the exported graph, as a runtime with a wrong update would."""

    def __init__(self, drift: bool = False) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("state", torch.zeros(2, 4))
        self.drift = drift

    def forward(self, x):
        y = self.proj(self.state) + x
        scale = 2.0 if self.drift and not torch.compiler.is_exporting() else 1.0
        self.state.mul_(0.5).add_(scale * x)
        return y


def _model(drift: bool = False):
    torch.manual_seed(0)
    model = Accumulator(drift).eval()
    model.state.copy_(torch.randn(2, 4))  # a state of earlier calls (a prefill), not the zeros of a fresh buffer
    return model, [torch.randn(2, 4) for _ in range(4)]


@needs_executorch
def test_a_state_is_checked_over_calls_from_the_models_state():
    model, calls = _model()
    state = model.state.clone()
    report = customops.deploy.check(model, (calls[0],), runtime="executorch", calls=calls)
    assert report.ok, report
    assert report.calls == 4 and len(report.output_calls) == 1 and set(report.state) == {"state"}
    assert report.outputs[0] <= 1e-5 and report.state["state"] <= 1e-5, report
    assert "over 4 calls" in str(report) and "buffer state" in str(report)
    torch.testing.assert_close(model.state, state, rtol=0, atol=0)  # eager ran on a copy
    # One call, from the model's state: its output and the state after it.
    report = customops.deploy.check(model, (calls[0],), runtime="executorch")
    assert report.ok and report.calls == 1 and set(report.state) == {"state"}, report


@needs_executorch
def test_a_program_that_starts_from_another_state_fails(monkeypatch):
    # ExecuTorch's default: a mutated buffer serialised by its shape alone, which the program starts without.
    from executorch.exir.pass_base import ExportPass
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    monkeypatch.setattr(InitializedMutableBufferPass, "placeholder", ExportPass.placeholder)
    model, calls = _model()
    report = customops.deploy.check(model, (calls[0],), runtime="executorch", calls=calls)
    assert not report.ok and report.outputs[0] > 1e-2, report


@needs_executorch
def test_a_wrong_state_update_fails_at_a_later_call():
    model, calls = _model(drift=True)
    # One call: its output reads the state before the update and matches; the state after it does not.
    report = customops.deploy.check(model, (calls[0],), runtime="executorch")
    assert report.outputs[0] <= 1e-5 and report.state["state"] > 1e-2 and not report.ok, report
    report = customops.deploy.check(model, (calls[0],), runtime="executorch", calls=calls)
    assert not report.ok and report.outputs[0] > 1e-2 and report.output_calls[0] >= 1, report
    assert any("output[0]" in f.message and "at call" in f.message for f in report.mismatches), report


def test_calls_are_for_executorch():
    model, calls = _model()
    with pytest.raises(ValueError, match="calls is for runtime='executorch'"):
        customops.deploy.check(model, (calls[0],), calls=calls)


def test_onnx_reports_a_buffer_update_unsupported():
    for extra in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(extra, reason="needs the onnx extra: pip install 'customops[onnx]'")
    model, calls = _model()
    state = model.state.clone()
    report = customops.deploy.check(model, (calls[0],))
    assert not report.ok, report
    assert [f.kind for f in report.flags] == ["unsupported"] and "(state)" in report.flags[0].message, report
    torch.testing.assert_close(model.state, state, rtol=0, atol=0)


@needs_executorch
def test_a_model_that_cannot_be_copied_is_checked_and_left_as_it_was():
    model, calls = _model()
    model.held = torch.ones(1, requires_grad=True) * 2  # made by autograd: deepcopy refuses it
    state = model.state.clone()
    report = customops.deploy.check(model, (calls[0],), runtime="executorch", calls=calls)
    assert report.ok and report.calls == 4, report
    torch.testing.assert_close(model.state, state, rtol=0, atol=0)  # its buffers put back after eager's calls
