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
COMPILED = (True, "SwiGLU MLP 32x512x1024 (H200): bf16 0.99 / 1.01, float32 1.00 / 1.00",
            "an elementwise map: in a compiled step Inductor's code for it is as fast, and fuses with its "
            "neighbours")
