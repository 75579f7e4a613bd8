"""gelu_tanh_mul's formulas: its value and derivatives, for every Python path (see the package's docstring);
kernels/gelu_tanh_mul.h holds the kernels' copy."""

from __future__ import annotations

INPUTS = ("a", "b")

# The nn.Module (customops.modules makes it): its class name, and a paragraph for its docstring if any.
MODULE = ("GeluTanhMul",)


# gelu_tanh(a) = a sigmoid(2 u), u = K (a + C a^3); kernels/gelu_tanh_mul.h says why it is written with sigmoids.
K, C = 0.7978845608028654, 0.044715  # sqrt(2 / pi), and kC


def forward(m, a, b):
    return a * m.sigmoid(2 * _u(a)) * b


def derivatives(m, a, b):
    s, sbar, du = m.sigmoid(2 * _u(a)), m.sigmoid(-2 * _u(a)), K * (1 + 3 * C * a * a)
    return (b * (s + 2 * a * s * sbar * du), a * s)


def second_derivatives(m, a, b):
    s, sbar, du = m.sigmoid(2 * _u(a)), m.sigmoid(-2 * _u(a)), K * (1 + 3 * C * a * a)
    dgelu = s + 2 * a * s * sbar * du
    return ((b * (2 * s * sbar * (2 * du + a * (2 * (sbar - s) * du * du + 6 * K * C * a))), dgelu), (dgelu, 0))


def _u(a):
    return K * (a + C * a * a * a)


# How compiled graphs treat the op (customops.inductor): decomposed into these formulas (True), or kept whole; the
# measurement that decided and why, for docs/design/compile.md (MyST Markdown).
COMPILED = (True, "not measured yet; as `silu_mul`, an elementwise map of the same shape",
            "an elementwise map: Inductor's code for it is as fast, and fuses with its neighbours")
