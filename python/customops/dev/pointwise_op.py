"""The files of a new pointwise operator (y = f(x1, ..., xN) over tensors of one shape), for N inputs.

A pointwise op's kernels, Meta kernels, checks, autograd, autocast policy and Python concerns are shared
(kernels/core/pointwise.h, kernels/common/pointwise.h, registration/pointwise.h, customops/*/_pointwise.py): what
is its own is its maths and what follows from its inputs' names and count. Everything that follows from the
inputs is written here, the same for every op of their arity (the C++ struct's signatures and `pw::Values<T, N>`
sizes, the C++ API and its tuple, the schemas, the Python signatures, the benchmark's inputs and bytes); where the
maths goes it writes a stub and a `TODO(<name>)`, which tests/python/test_registry.py rejects until it is replaced.
So does everything that follows from its scalar arguments (--args, customops._scalar_args): their `kArgs` entries
and values in the formulas' signatures, the schemas' types and defaults, the C++ API's and Python signatures, the
nn.Module's constructor (made from `ARGS`), the benchmark's values.
"""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

from .._scalar_args import Arg


def _todo(name: str, what: str, comment: str) -> str:
    return f"{comment} TODO({name}): {what}"


_CPP_TYPES = {"float": "double", "int": "int64_t", "bool": "bool", "choice": "c10::string_view"}


def _cpp_param(a: Arg) -> str:
    """The argument in the C++ API: ``double cap``, ``double alpha = 1.0``, ``c10::string_view mode = "none"``."""
    text = f"{_CPP_TYPES[a.type]} {a.name}"
    if not a.has_default:
        return text
    value = {"choice": f'"{a.default}"', "bool": str(a.default).lower()}.get(a.type, repr(a.default))
    return f"{text} = {value}"


def _cpp_value(a: Arg, k: int) -> str:
    """The line of a formula that names argument k's value (pw::Args: doubles in kArgs' order)."""
    if a.type == "bool":
        return f"[[maybe_unused]] const bool {a.name} = args[{k}] != 0;"
    if a.type == "choice":
        options = ", ".join(f"{i}: {o}" for i, o in enumerate(a.options))
        return f"[[maybe_unused]] const int {a.name} = static_cast<int>(args[{k}]);  // {options}"
    return f"[[maybe_unused]] const T {a.name} = T(args[{k}]);"


def files(name: str, cls: str, inputs: Sequence[str], args: Sequence[Arg] = ()) -> Dict[str, str]:
    """Relative path -> text of each file the op owns; `args`: its scalar arguments, after its tensors."""
    n, xs = len(inputs), list(inputs)
    first = xs[0]
    comma = "," if n == 1 else ""  # a tuple of one
    k = len(args)
    names = [a.name for a in args]
    a_param = f"const pw::Args<{k}>& args, " if k else ""
    t_args = a_param + ", ".join(f"T {x}" for x in xs)
    a_lines = "".join(f"    {_cpp_value(a, i)}\n" for i, a in enumerate(args))
    tensor_args = ", ".join([*(f"const at::Tensor& {x}" for x in xs), *(_cpp_param(a) for a in args)])
    py_args = ", ".join(xs + names)
    py_typed = ", ".join([*(f"{x}: Tensor" for x in xs), *(a.python() for a in args)])
    semi = f"; {', '.join(names)}" if k else ""
    f_of = f"f({', '.join(xs)}{semi})."  # f(x; cap).
    args_decl = "" if not k else (
        "\n  // Its scalar arguments, after the tensors in its schemas, and their ranges (checked by every kernel); the\n"
        "  // formulas take their values first, as doubles in this order (pw::Args: a float's or an int's value, a\n"
        "  // bool's 0 or 1, a choice's index among its options).\n"
        f"  static constexpr pw::Arg kArgs[] = {{{', '.join(a.cpp() for a in args)}}};")
    pairs = ", ".join(f"d2f/d{a} d{b}" for a in xs for b in xs)
    grads_type = "at::Tensor" if n == 1 else f"std::tuple<{', '.join(['at::Tensor'] * n)}>"
    unit = ", ".join("T(1)" if i == 0 else "T(0)" for i in range(n))
    zeros = ", ".join(["T(0)"] * (n * n))
    out: Dict[str, str] = {}

    out[f"kernels/{name}.h"] = f"""\
// {name}: y = {_todo(name, "what it computes, in a line.", "").strip()}
#pragma once

#include "kernels/core/pointwise.h"

namespace customops {{

// The formulas, written once (kernels/core/pointwise.h): with arithmetic, T(constant), pw::exp, pw::sigmoid and
// pw::tanh, on numbers (CUDA, the CPU tails), SIMD vectors (the CPU body) and tensors (the double backward), in
// the kernels' opmath type. The tests compare them with the Python copy, python/customops/pointwise/{name}.py.
struct {cls} : pw::Formula {{
  static constexpr const char* kName = "{name}";
  static constexpr const char* kInputs[] = {{{", ".join(f'"{x}"' for x in xs)}}};{args_decl}

  template <typename T>
  C10_HOST_DEVICE static T forward({t_args}) {{
{a_lines}    return {first};  {_todo(name, f_of, "//")}
  }}

  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, {n}> derivatives({t_args}) {{
{a_lines}    return {{{unit}}};  {_todo(name, ", ".join(f"df/d{x}" for x in xs) + ".", "//")}
  }}

  template <typename T>
  C10_HOST_DEVICE static pw::Values<T, {n * n}> second_derivatives({t_args}) {{
{a_lines}    return {{{zeros}}};  {_todo(name, pairs + " (row-major).", "//")}
  }}
}};

}} // namespace customops
"""

    # Its CPU and CUDA kernels and its registration are written by CMake from this header
    # (cmake/CustomopsPointwise.cmake).

    grads = ", ".join(f"grad_out * d/d{x}" for x in xs)
    one_shape = " of one shape, dtype and device" if n > 1 else ""
    out[f"ops/include/customops/{name}.h"] = f"""\
#pragma once

#include <ATen/core/Tensor.h>

#include <customops/detail/find_op.h>{"" if n == 1 else chr(10) + "#include <tuple>"}

namespace customops {{

// y = {_todo(name, "what it computes.", "").strip()}
// {", ".join(xs)}: floating tensors (float16, bfloat16, float32, float64){one_shape},
// CPU or CUDA; half types are computed in float. Differentiable.
inline at::Tensor {name}({tensor_args}) {{
  static const auto op = detail::find_op<decltype({name})>("customops::{name}");
  return op.call({py_args});
}}

// Gradient{"s" if n > 1 else ""} of {name}: {grads}.
// grad_out must have {first}'s shape, dtype and device. Differentiable (double backward).
inline {grads_type} {name}_backward(
    const at::Tensor& grad_out, {tensor_args}) {{
  static const auto op = detail::find_op<decltype({name}_backward)>("customops::{name}_backward");
  return op.call(grad_out, {py_args});
}}

}} // namespace customops
"""

    arg_docs = "\n".join(
        f"        {x}: float16, bfloat16, float32 or float64, on CPU or CUDA." if i == 0 else
        f"        {x}: ``{first}``'s shape, dtype and device (no broadcasting)." for i, x in enumerate(xs))
    arg_docs += "".join(f"\n        {a.name}: TODO({name}): what it sets" + (f"; {a.range_text()}" if a.range_text() else "")
                        + (f" (default {a.default!r})" if a.has_default else "") + "." for a in args)
    autocast = ("\n            Under ``torch.autocast`` inputs of several dtypes run in the widest, as ``a * b`` does."
                if n > 1 else "")
    out[f"python/customops/functional/{name}.py"] = f'''\
"""customops.{name}."""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import _overview

__all__ = ["{name}"]


# Its line in the docs' operator table; a dense input of any layout keeps it (the shared kernels).
@_overview("TODO({name}): what it computes, in a line",
           layouts=("any dense layout, native", "native", "{"the input's" if n == 1 else f"{first}'s"}"))
def {name}({py_typed}) -> Tensor:
    r"""TODO({name}): what it computes, in a line: ``y = ...``.

    TODO({name}): what it replaces, and why it is faster.

    Args:
{arg_docs}{autocast}
            Half-precision inputs are computed in float32.

    Returns:
        A tensor like ``{first}``; a dense ``{first}`` (contiguous, channels_last,
        transposed) keeps its memory layout. Differentiable, twice.
    """
    return torch.ops.customops.{name}({py_args})
'''

    firsts = ", ".join(f"df/d{x}" for x in xs) + comma
    second = "(" + ", ".join("(" + ", ".join(f"d2f/d{a} d{b}" for b in xs) + comma + ")" for a in xs) + comma + ")"
    args_spec = "" if not k else (
        "\n# Its scalar arguments, after the tensors (customops._scalar_args: name:type, range, =default); the formulas\n"
        "# take their values after the tensors' (a choice's as its option's string).\n"
        "ARGS = (" + ", ".join(f'"{a.spec()}"' for a in args) + ",)")
    out[f"python/customops/pointwise/{name}.py"] = f'''\
"""{name}'s formulas: its value and derivatives, for every Python path (see the package's docstring);
kernels/{name}.h holds the kernels' copy."""

from __future__ import annotations

INPUTS = ({", ".join(f'"{x}"' for x in xs)}{comma}){args_spec}

# The nn.Module (customops.modules makes it): its class name, and a paragraph for its docstring if any.
MODULE = ("{cls}",)


def forward(m, {py_args}):
    raise NotImplementedError("TODO({name}): f({py_args}), with Python's arithmetic and m.exp, m.sigmoid, m.tanh")


def derivatives(m, {py_args}):
    raise NotImplementedError("TODO({name}): ({firsts}), the backward op's factors of grad_out")


def second_derivatives(m, {py_args}):
    raise NotImplementedError("TODO({name}): {second}, 0 where one is zero")


# How compiled graphs treat the op (customops.inductor): decomposed into these formulas (True), or kept whole; the
# measurement that decided and why, for docs/design/compile.md (MyST Markdown).
COMPILED = ("TODO({name}): True (decomposed) or False (kept whole), as measured",
            "TODO({name}): the model, sizes and ratios measured", "TODO({name}): why")
'''

    out[f"tests/python/op_db/{name}.py"] = f'''\
"""{name}: TODO({name}): the op in a line."""

from __future__ import annotations

import customops
from customops.benchmark.ops.{name} import {name}_reference
from customops.pointwise import {name} as formulas

from ._pointwise import pointwise_opinfo

# The reference is the plain-PyTorch calls the op replaces (the benchmark's baseline), written apart from the
# formulas: the tests hold the kernels' values and gradients, and the formulas, to it in float64.
OPS = [pointwise_opinfo(formulas, op=customops.{name}, module=customops.{cls},
                        reference={name}_reference,
                        onnx_nodes=[("TODO({name}): the ONNX nodes on the path to the output", {{}})])]
'''

    quoted = ", ".join(f'"{x}"' for x in xs)
    values = [a.valid_values()[0] for a in args]  # the benchmark's and demo's: the defaults, or a value in range
    bench_args = f", args={tuple(values)!r}" if k else ""
    module_args = ", ".join(f"{a.name}={v!r}" for a, v in zip(args, values))
    demo_reference = (f"lambda *xs: {name}_reference(*xs, {', '.join(map(repr, values))})" if k
                      else f"{name}_reference")
    out[f"python/customops/benchmark/ops/{name}.py"] = f'''\
"""{name} against the plain-PyTorch calls it replaces, eager and compiled."""

from __future__ import annotations

from typing import Iterator

import torch

import customops

from ..table import BenchOp, Case, Demo
from . import _pointwise


def {name}_reference({py_typed.replace("Tensor", "torch.Tensor")}) -> torch.Tensor:
    """The plain-PyTorch calls the op replaces: the baseline, eager and compiled, and the tests' reference."""
    # TODO({name}): the op as users write it in PyTorch (torch.nn.functional, torch.special, ...), not from
    # customops.pointwise's formulas.
    raise NotImplementedError("TODO({name})")


def _{name}_cases(device: torch.device, quick: bool) -> Iterator[Case]:
    shape, dtypes, label = _pointwise.default_shape(device, quick)
    return _pointwise.cases("{name}", customops.{name}, {name}_reference, ({quoted}{comma}), device, shape, dtypes,
                            label{bench_args})


def _{name}_demo(device: torch.device) -> Demo:
    inputs = tuple(torch.randn(64, 1024, device=device) * 4 for _ in range({n}))
    return Demo(customops.{cls}({module_args}), inputs,
                {demo_reference})


BENCH_OPS = [
    BenchOp("{name}", _{name}_cases, _{name}_demo),
]
'''
    return out


def schemas(name: str, inputs: Sequence[str], scalars: Sequence[Arg] = ()) -> Tuple[str, str, str]:
    """The op's, its out variant's (ExecuTorch's kernel) and its backward op's schemas (registration/schemas.cpp):
    the scalar arguments after the tensors, with their defaults."""
    args = ", ".join([*(f"Tensor {x}" for x in inputs), *(a.schema() for a in scalars)])
    grads = "Tensor" if len(inputs) == 1 else "(" + ", ".join(["Tensor"] * len(inputs)) + ")"
    return (f"{name}({args}) -> Tensor", f"{name}.out({args}, *, Tensor(a!) out) -> Tensor(a!)",
            f"{name}_backward(Tensor grad_out, {args}) -> {grads}")
