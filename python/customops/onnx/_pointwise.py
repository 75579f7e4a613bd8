"""The pointwise formulas (customops.pointwise) on ONNX values: Python's arithmetic and the maths namespace become
ONNX nodes, numbers become constants of the compute dtype (the kernels' opmath type, float for the half types).
Each pointwise family's translation is made here (``family``), not written in a module of its own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

from .._families import function_from_source, short_name, synthesized
from ..pointwise import args_of, as_text, text_names
from ._common import TFloat, compute_dtype, op, scalar, to_compute


class _Value:
    """An ONNX value of the compute dtype, with Python's arithmetic operators."""

    def __init__(self, value, dtype):
        self.value, self.dtype = value, dtype

    def _of(self, other):
        return other.value if isinstance(other, _Value) else scalar(float(other), self.dtype)

    def _new(self, value) -> "_Value":
        return _Value(value, self.dtype)

    def __neg__(self):
        return self._new(op.Neg(self.value))


def _binary(node):
    return (lambda a, b: a._new(node(a.value, a._of(b))),  # a <op> b
            lambda a, b: a._new(node(a._of(b), a.value)))  # b <op> a, b a number


for _name, _node in (("add", op.Add), ("sub", op.Sub), ("mul", op.Mul), ("truediv", op.Div)):
    _forward, _reverse = _binary(_node)
    setattr(_Value, f"__{_name}__", _forward)
    setattr(_Value, f"__r{_name}__", _reverse)


# The maths namespace's functions (customops.pointwise.TORCH's names) as ONNX operators.
NODES = {"exp": "Exp", "sigmoid": "Sigmoid", "tanh": "Tanh"}
ONNX = SimpleNamespace(**{name: (lambda v, node=getattr(op, node): v._new(node(v.value)))
                          for name, node in NODES.items()})


def translation_text(formula: Callable, *names: str) -> str:
    """The formula in ONNX operators, for the docs' table (e.g. ``x * Sigmoid(1.702 * x)``); a new op's formula
    that is still the scaffold's stub gives its TODO, so that the package (every family's translations) imports."""
    try:
        return as_text(formula, *names, functions=NODES)
    except NotImplementedError as todo:
        return str(todo)


def on_values(formula: Callable, *values):
    """``formula(ONNX, *values)`` as nodes computing in the first value's compute dtype, the result cast back to
    its dtype; the op's scalar arguments (attributes of the translation: Python values) as they are, which the
    arithmetic makes constants."""
    dtype = compute_dtype(values[0])
    result = formula(ONNX, *(v if isinstance(v, (bool, int, float, str)) else _Value(to_compute(v, dtype), dtype)
                             for v in values))
    return to_compute(result.value, values[0].dtype)


def _translation(name: str, inputs: tuple, formula: Callable, args: tuple = ()) -> Callable:
    """``name(x1: TFloat, ..., arg: float, ...) -> TFloat``: onnxscript reads the inputs' types from the signature,
    and takes the scalar arguments as attributes."""
    params = [f"{x}: TFloat" for x in inputs] + [a.python() for a in args]
    source = f"def {name}({', '.join(params)}) -> TFloat:\n" \
             f"    return on_values(formula, {', '.join([*inputs, *(a.name for a in args)])})\n"
    scope = {"__name__": __name__, "TFloat": TFloat, "on_values": on_values, "formula": formula}
    return function_from_source(source, name, scope, f"ONNX translation of {name}")


def family(formulas):
    """The translation of a pointwise family's op (the kernels compute half types in float; so does the graph,
    for the same values) and its row of the docs' table."""
    name = short_name(formulas)
    return synthesized(__package__, formulas,
                       TRANSLATIONS={name: _translation(name, formulas.INPUTS, formulas.forward, args_of(formulas))},
                       DOC_ROWS=[(f"`{name}`", f"`{translation_text(formulas.forward, *text_names(formulas))}`")])
