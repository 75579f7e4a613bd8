"""silu_mul's formulas: its value and derivatives, for every Python path (see the package's docstring);
kernels/silu_mul.h holds the kernels' copy."""

from __future__ import annotations

INPUTS = ("a", "b")


def forward(m, a, b):
    return a * m.sigmoid(a) * b


def derivatives(m, a, b):
    s = m.sigmoid(a)
    return (b * (s * (1 + a * (1 - s))), a * s)


def second_derivatives(m, a, b):
    s = m.sigmoid(a)
    dsilu = s * (1 + a * (1 - s))
    return ((b * (s * (1 - s) * (2 + a * (1 - 2 * s))), dsilu), (dsilu, 0))


# How compiled graphs treat the op (customops.inductor): decomposed into these formulas, or kept whole; the
# measurement that decided and why, for docs/design/compile.md (MyST Markdown).
COMPILED = (True, "docs/performance/silu_mul.md: compiled, Inductor's code for the formula against the kernel",
            "an elementwise map: Inductor fuses it with the matmuls' epilogues and the chunk that makes a and b")
