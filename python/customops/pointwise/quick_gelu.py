"""quick_gelu's formulas: its value and derivatives, for every Python path (see the package's docstring);
kernels/quick_gelu.h holds the kernels' copy."""

from __future__ import annotations

INPUTS = ("x",)

# The nn.Module (customops.modules makes it): its class name, and a paragraph for its docstring.
MODULE = ("QuickGELU", "A drop-in for ``nn.GELU()`` in models trained with the sigmoid approximation (CLIP's "
          "``QuickGELU``).")

ALPHA = 1.702  # kernels/quick_gelu.h kAlpha


def forward(m, x):
    return x * m.sigmoid(ALPHA * x)


def derivatives(m, x):
    s = m.sigmoid(ALPHA * x)
    return (s + ALPHA * x * s * (1 - s),)


def second_derivatives(m, x):
    # With s = sigmoid(a x): f''(x) = a s (1 - s) (2 + a x (1 - 2 s)), as kernels/quick_gelu.h.
    s = m.sigmoid(ALPHA * x)
    return ((ALPHA * s * (1 - s) * (2 + ALPHA * x * (1 - 2 * s)),),)


# How compiled graphs treat the op (customops.inductor): decomposed into these formulas, or kept whole; the
# measurement that decided and why, for docs/design/compile.md (MyST Markdown).
COMPILED = (True, "CLIP ViT-B MLP 64x197x768: bf16 0.98 / 1.04, float32 1.00 / 1.00",
            "an elementwise map: Inductor's code is as fast and fuses it with the bias add and the gradient's "
            "neighbours")
