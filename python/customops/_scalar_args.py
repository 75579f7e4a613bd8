"""A pointwise op's scalar arguments (no torch here: the scaffold, customops.dev, reads them before any set-up): ``ARGS`` of its formulas' module, one spec each, the scaffold's syntax
(``scripts/new_op.py NAME --inputs x --args "cap:float>0"``):

    name:float[>|>=|<|<=bound]...[=default]     cap:float>0    alpha:float=1.0    p:float>=0<1=0.5
    name:int[...bounds][=default]               n:int>=1<=8=2
    name:bool[=default]                         inplace:bool=false
    name:{option,...}[=default]                 approximate:{none,tanh}=none

Each argument follows the op's tensors in its schemas (a float is ``float``, a choice ``str``), in the kernels'
signatures and in every Python path; the formulas receive its value (a choice's option as its string in Python,
as its index among the options in C++, kernels/core/pointwise.h's ``pw::Arg``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Tuple

_SPEC = re.compile(r"^\s*(?P<name>[a-z][a-z0-9_]*)\s*:\s*(?P<type>float|int|bool|\{[^}]*\})(?P<rest>.*)$")
_TERM = re.compile(r"\s*(?P<op>>=|<=|>|<|=)\s*(?P<value>[^<>=\s]+)")
_REQUIRED = object()


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # "float", "int", "bool" or "choice"
    default: Any = _REQUIRED
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    options: Tuple[str, ...] = field(default_factory=tuple)

    @property
    def has_default(self) -> bool:
        return self.default is not _REQUIRED

    @property
    def python_type(self) -> str:
        return {"float": "float", "int": "int", "bool": "bool", "choice": "str"}[self.type]

    def accepts(self, value) -> bool:
        if self.type == "choice":
            return value in self.options
        if self.type == "bool":
            return isinstance(value, bool)
        return (value > self.low if self.low_open else value >= self.low) and \
            (value < self.high if self.high_open else value <= self.high)

    def range_text(self) -> str:
        """``cap > 0``, ``n >= 1 and n <= 8``, ``approximate in {none, tanh}``; empty where any value goes."""
        if self.type == "choice":
            return f"{self.name} in {{{', '.join(self.options)}}}"
        parts = []
        if self.low > -math.inf:
            parts.append(f"{self.name} {'>' if self.low_open else '>='} {_number(self.low)}")
        if self.high < math.inf:
            parts.append(f"{self.name} {'<' if self.high_open else '<='} {_number(self.high)}")
        return " and ".join(parts)

    def spec(self) -> str:
        """The argument's spec (``cap:float>0``), as parse reads it."""
        kind = f"{{{','.join(self.options)}}}" if self.type == "choice" else self.type
        bounds = ""
        if self.low > -math.inf:
            bounds += f"{'>' if self.low_open else '>='}{_number(self.low)}"
        if self.high < math.inf:
            bounds += f"{'<' if self.high_open else '<='}{_number(self.high)}"
        default = ""
        if self.has_default:
            default = "=" + (str(self.default).lower() if self.type == "bool" else str(self.default))
        return f"{self.name}:{kind}{bounds}{default}"

    def schema(self) -> str:
        """The argument in a schema: ``float cap``, ``float alpha=1.``, ``str approximate="none"``."""
        text = f"{self.python_type} {self.name}"
        if not self.has_default:
            return text
        if self.type == "choice":
            return f'{text}=\\"{self.default}\\"'  # inside the C++ string literal of registration/schemas.cpp
        if self.type == "bool":
            return f"{text}={'True' if self.default else 'False'}"
        return f"{text}={float(self.default)!r}" if self.type == "float" else f"{text}={self.default}"

    def cpp(self) -> str:
        """The argument's entry of its struct's kArgs (kernels/core/pointwise.h's pw::Arg)."""
        if self.type == "choice":
            return f'pw::Arg::choice("{self.name}", "{",".join(self.options)}")'
        text = f'pw::Arg::{ {"float": "real", "int": "integer", "bool": "boolean"}[self.type]}("{self.name}")'
        if self.low > -math.inf:
            text += f".{'gt' if self.low_open else 'ge'}({_number(self.low)})"
        if self.high < math.inf:
            text += f".{'lt' if self.high_open else 'le'}({_number(self.high)})"
        return text

    def python(self) -> str:
        """The argument in a Python signature: ``cap: float``, ``alpha: float = 1.0``."""
        return f"{self.name}: {self.python_type}" + (f" = {self.default!r}" if self.has_default else "")

    def valid_values(self) -> list:
        """A few values in range, the default first: what the tests call the op with."""
        if self.type == "choice":
            candidates = [self.default] if self.has_default else []
            candidates += list(self.options)
        elif self.type == "bool":
            candidates = [self.default] if self.has_default else []
            candidates += [False, True]
        else:
            candidates = [self.default] if self.has_default else []
            finite = [v for v in (self.low, self.high) if math.isfinite(v)]
            near = [b + d for b in finite for d in (0.5, -0.5, 2.0, -2.0, 1, -1)] + [1.0, 0.5, 2.5, -1.5, 0.0]
            if self.type == "int":
                near = [int(round(v)) for v in near] + [1, 2, 3, 0, -1]
            candidates += near
        out = []
        for v in candidates:
            if self.accepts(v) and v not in out:
                out.append(v)
        return out[:3]

    def invalid_values(self) -> list:
        """Values out of range (none for a bool): what the error inputs try."""
        if self.type == "choice":
            return ["not_an_option"]
        if self.type == "bool":
            return []
        out = []
        if self.low > -math.inf:
            out.append(self.low if self.low_open else self.low - 1)
        if self.high < math.inf:
            out.append(self.high if self.high_open else self.high + 1)
        return [int(v) if self.type == "int" else float(v) for v in out]


def _number(v) -> str:
    return repr(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def parse(spec: str) -> Arg:
    """One argument from its spec (see the module's docstring); SystemExit with what is wrong."""
    m = _SPEC.match(spec)
    if not m:
        raise SystemExit(f"--args: {spec!r} is not name:type[bounds][=default] (type: float, int, bool or "
                         "{option,...})")
    kind, options = m["type"], ()
    if kind.startswith("{"):
        options = tuple(o.strip() for o in kind[1:-1].split(","))
        if not all(re.fullmatch(r"[A-Za-z0-9_]+", o) for o in options) or len(set(options)) != len(options) \
                or len(options) < 2:
            raise SystemExit(f"--args: {spec!r}: a choice's options are two or more distinct words")
        kind = "choice"
    fields: dict = {}
    rest = m["rest"]
    while rest.strip():
        t = _TERM.match(rest)
        if not t:
            raise SystemExit(f"--args: {spec!r}: cannot read {rest.strip()!r}")
        rest = rest[t.end():]
        op, value = t["op"], t["value"]
        if op == "=":
            fields["default"] = _value(kind, options, value, spec)
            continue
        if kind in ("bool", "choice"):
            raise SystemExit(f"--args: {spec!r}: a {kind} has no range")
        bound = float(value)
        if op.startswith(">"):
            fields.update(low=bound, low_open=op == ">")
        else:
            fields.update(high=bound, high_open=op == "<")
    arg = Arg(m["name"], kind, options=options, **fields)
    if arg.has_default and not arg.accepts(arg.default):
        raise SystemExit(f"--args: {spec!r}: the default is out of the range")
    if kind != "bool" and not arg.valid_values():
        raise SystemExit(f"--args: {spec!r}: no value is in the range")
    return arg


def _value(kind: str, options: Sequence[str], text: str, spec: str):
    try:
        if kind == "float":
            return float(text)
        if kind == "int":
            return int(text)
        if kind == "bool":
            return {"true": True, "false": False}[text.lower()]
    except (ValueError, KeyError):
        raise SystemExit(f"--args: {spec!r}: {text!r} is not a {kind}") from None
    if text not in options:
        raise SystemExit(f"--args: {spec!r}: the default {text!r} is not one of its options")
    return text


def split(specs: str) -> list:
    """Several specs, comma-separated (a choice's braces keep their commas)."""
    out, depth, current = [], 0, ""
    for c in specs:
        depth += c == "{"
        depth -= c == "}"
        if c == "," and depth == 0:
            out.append(current)
            current = ""
        else:
            current += c
    return [s for s in out + [current] if s.strip()]


def of(formulas) -> Tuple[Arg, ...]:
    """The arguments of a family's formulas module (its ARGS), none where it has no ARGS."""
    return tuple(parse(spec) for spec in getattr(formulas, "ARGS", ()))


def defaults(args: Sequence[Arg]) -> tuple:
    """The first valid value of each argument (its default where it has one)."""
    return tuple(a.valid_values()[0] for a in args)
