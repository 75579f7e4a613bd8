"""The formulas of the pointwise operators, written once for every Python path.

A family module here defines its op's value and derivatives as Python functions of a maths namespace ``m``
(``m.exp``, ``m.sigmoid``, ``m.tanh``) and of the op's inputs, with Python's arithmetic operators; an op with
scalar arguments (its ``ARGS``, :mod:`customops._scalar_args`) takes their values after its inputs. The same
functions are evaluated on torch tensors (:func:`on_tensors`: Inductor's and litert-torch's decompositions,
torch.func's double backward, the tests' reference), on ONNX values (customops.onnx's translation) and on names
(:func:`as_text`: the docs' tables). The kernels' C++ copy of each formula is in kernels/<family>.h; the tests
compare every path with the kernels.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Optional

import torch

from .._families import family_modules
from .._scalar_args import Arg, of as args_of  # noqa: F401 (the families' arguments, for every Python path)

# The maths namespace on torch tensors.
TORCH = SimpleNamespace(exp=torch.exp, sigmoid=torch.sigmoid, tanh=torch.tanh)


def families():
    """The family modules of this package (every module not starting with '_')."""
    return family_modules(__name__, __path__)


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The type the kernels compute in (at::opmath_type): float32 for the half types."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def on_tensors(formula: Callable, *values) -> torch.Tensor:
    """``formula(TORCH, *values)`` computed as the kernels compute it: every tensor in the opmath type of the first
    one's dtype, the result in that dtype; the scalar arguments (numbers, symbolic under torch.compile, strings) as
    they are."""
    dtype = values[0].dtype
    compute = opmath(dtype)
    return formula(TORCH, *(v.to(compute) if isinstance(v, torch.Tensor) else v for v in values)).to(dtype)


class _Text:
    """An expression's text, with its precedence: 1 for + and -, 2 for * and /, 3 for a negation, 4 for an atom."""

    def __init__(self, text: str, precedence: int = 4):
        self.text, self.precedence = text, precedence

    @staticmethod
    def _of(value) -> "_Text":
        return value if isinstance(value, _Text) else _Text(f"{value:g}")

    def _binary(self, other, symbol: str, precedence: int, swap: bool = False) -> "_Text":
        left, right = (self._of(other), self) if swap else (self, self._of(other))
        # a - (b - c) and a / (b * c) keep their brackets; a + (b + c) and a * (b * c) need none.
        tight = symbol in "-/"
        lhs = left.text if left.precedence >= precedence else f"({left.text})"
        rhs = right.text if right.precedence > precedence or (right.precedence == precedence and not tight) \
            else f"({right.text})"
        return _Text(f"{lhs} {symbol} {rhs}", precedence)

    def __neg__(self):
        return _Text("-" + (self.text if self.precedence >= 3 else f"({self.text})"), 3)


for _name, _symbol, _precedence in (("add", "+", 1), ("sub", "-", 1), ("mul", "*", 2), ("truediv", "/", 2)):
    setattr(_Text, f"__{_name}__", lambda a, b, s=_symbol, p=_precedence: a._binary(b, s, p))
    setattr(_Text, f"__r{_name}__", lambda a, b, s=_symbol, p=_precedence: a._binary(b, s, p, swap=True))


def as_text(formula: Callable, *names, functions: Optional[dict] = None) -> str:
    """The formula written out, e.g. ``x * sigmoid(1.702 * x)``; ``functions`` renames the maths namespace's
    functions (ONNX's ``Sigmoid``, ...). A name is a plain string; any other value (a bool's or a choice's, which
    the formula branches on: text_names) is passed as it is."""
    functions = functions or {}
    maths = SimpleNamespace(**{name: (lambda v, name=name: _Text(f"{functions.get(name, name)}({v.text})"))
                               for name in vars(TORCH)})
    return _Text._of(formula(maths, *(_Text(n) if type(n) is str else n for n in names))).text


def text_names(formulas) -> tuple:
    """What as_text takes for a family's formulas: its inputs' and numeric arguments' names, and the default (or
    first) value of each bool and choice."""
    return (*formulas.INPUTS, *(a.name if a.type in ("float", "int") else
                               a.valid_values()[0] if a.type == "bool" else _Value(a.valid_values()[0])
                               for a in args_of(formulas)))


class _Value(str):
    """A choice's option where as_text takes names: equal to its string, not a name."""
