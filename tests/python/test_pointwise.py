"""customops.pointwise: each pointwise family's formulas, which every Python path evaluates (Inductor, ONNX,
torch.func, the sharding rules). Its value must be the OpInfo's reference (the op in PyTorch's functions, written
apart), its derivatives the derivatives of its value (autograd through the formula), in float64 on the op's
samples, and its formulas must use nothing but Python's arithmetic and the maths namespace that both the torch and
the ONNX evaluations provide."""

from __future__ import annotations

import pytest
import torch

from customops import pointwise
from customops.onnx import _pointwise as onnx_pointwise
from op_db import OP_DB

pytestmark = pytest.mark.torch_independent

FAMILIES = pointwise.families()


def _op(family):
    return next(op for op in OP_DB if op.name == family.__name__.rsplit(".", 1)[1])


def _samples(family):
    op = _op(family)
    for sample in op.sample_inputs("cpu", torch.float64, False):
        if all(t.numel() > 0 for t in sample.tensors()):
            yield sample


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.rsplit(".", 1)[1])
def test_value_is_the_reference(family):
    reference = _op(family).ref
    for sample in _samples(family):
        torch.testing.assert_close(family.forward(pointwise.TORCH, *sample.args), reference(*sample.args),
                                   msg=lambda m: f"{sample.name}: {m}")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.rsplit(".", 1)[1])
def test_derivatives_are_the_values_derivatives(family):
    for sample in _samples(family):
        xs = [t.detach().clone().requires_grad_() for t in sample.tensors()]
        assert len(xs) == len(family.INPUTS), sample.name
        args = sample.args[len(xs):]  # the scalar arguments
        value = family.forward(pointwise.TORCH, *xs, *args)
        want = torch.autograd.grad(value.sum(), xs, create_graph=True)
        got = family.derivatives(pointwise.TORCH, *xs, *args)
        assert len(got) == len(xs), sample.name
        for i, (g, w) in enumerate(zip(got, want)):
            torch.testing.assert_close(g, w, msg=lambda m: f"{sample.name}, df/d{family.INPUTS[i]}: {m}")
        second = family.second_derivatives(pointwise.TORCH, *xs, *args)
        for i in range(len(xs)):
            row = torch.autograd.grad(want[i].sum(), xs, allow_unused=True, retain_graph=True)
            for j in range(len(xs)):
                w = torch.zeros_like(xs[j]) if row[j] is None else row[j]
                g = torch.as_tensor(second[i][j], dtype=w.dtype).expand_as(w)
                torch.testing.assert_close(g, w, msg=lambda m: f"{sample.name}, d2f/d{i}d{j}: {m}")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.rsplit(".", 1)[1])
def test_formulas_use_only_the_shared_maths(family):
    # The ONNX evaluation knows every function of the torch one.
    assert set(onnx_pointwise.NODES) == set(vars(pointwise.TORCH))
    args = tuple(a.valid_values()[0] for a in pointwise.args_of(family))
    for formula in (family.forward, family.derivatives, family.second_derivatives):
        leaves = len(_leaves(formula(pointwise.TORCH, *(torch.ones(()) for _ in family.INPUTS), *args)))
        for k in range(leaves):  # as_text raises on anything but the namespace and arithmetic
            assert pointwise.as_text(lambda m, *xs: _leaves(formula(m, *xs))[k], *pointwise.text_names(family))


def _leaves(value) -> list:
    """A formula's results: its value, or the values of its tuples (of tuples)."""
    return [leaf for v in value for leaf in _leaves(v)] if isinstance(value, tuple) else [value]


def test_as_text_brackets_what_needs_them():
    assert pointwise.as_text(lambda m, a, b: a - (b - a) / (a * b) / -(a + b), "a", "b") == \
        "a - (b - a) / (a * b) / -(a + b)"
    assert pointwise.as_text(lambda m, x: 2 * x * m.exp(-x) + 1, "x") == "2 * x * exp(-x) + 1"
