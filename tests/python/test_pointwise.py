"""customops.pointwise: each pointwise family's formulas, which every Python path evaluates (Inductor, ONNX,
torch.func, the tests' reference, the benchmark's baseline). Its derivatives must be the derivatives of its value
(autograd through the formula, in float64, on the op's samples), and its formulas must use nothing but Python's
arithmetic and the maths namespace that both the torch and the ONNX evaluations provide."""

from __future__ import annotations

import pytest
import torch

from customops import pointwise
from customops.onnx import _pointwise as onnx_pointwise
from op_db import OP_DB

FAMILIES = pointwise.families()


def _samples(family):
    op = next(op for op in OP_DB if op.name == family.__name__.rsplit(".", 1)[1])
    for sample in op.sample_inputs("cpu", torch.float64, False):
        if all(t.numel() > 0 for t in sample.tensors()):
            yield sample


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.rsplit(".", 1)[1])
def test_derivatives_are_the_values_derivatives(family):
    for sample in _samples(family):
        xs = [t.detach().clone().requires_grad_() for t in sample.tensors()]
        value = family.forward(pointwise.TORCH, *xs)
        grads = torch.autograd.grad(value.sum(), xs, create_graph=True)
        derivatives = _as_tuple(family.derivative(pointwise.TORCH, *xs))
        assert len(derivatives) == len(xs), sample.name
        for got, want in zip(derivatives, grads):
            torch.testing.assert_close(got, want, msg=lambda m: f"{sample.name}, derivative: {m}")
        if len(xs) == 1 and hasattr(family, "second_derivative"):
            (want,) = torch.autograd.grad(grads[0].sum(), xs)
            got = family.second_derivative(pointwise.TORCH, *xs)
            torch.testing.assert_close(got, want, msg=lambda m: f"{sample.name}, second derivative: {m}")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.rsplit(".", 1)[1])
def test_formulas_use_only_the_shared_maths(family):
    # The ONNX evaluation knows every function of the torch one.
    assert set(onnx_pointwise.NODES) == set(vars(pointwise.TORCH))
    names = [f"x{i}" for i in range(len(next(_samples(family)).tensors()))]
    for formula in (family.forward, family.derivative, getattr(family, "second_derivative", None)):
        if formula is not None:
            assert pointwise.as_text(formula, *names)  # raises on anything but the namespace and arithmetic


def test_as_text_brackets_what_needs_them():
    assert pointwise.as_text(lambda m, a, b: a - (b - a) / (a * b) / -(a + b), "a", "b") == \
        "a - (b - a) / (a * b) / -(a + b)"
    assert pointwise.as_text(lambda m, x: 2 * x * m.exp(-x) + 1, "x") == "2 * x * exp(-x) + 1"
