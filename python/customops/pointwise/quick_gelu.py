"""quick_gelu's formulas: its value and derivatives, for every Python path (see the package's docstring);
kernels/quick_gelu.h holds the kernels' copy."""

from __future__ import annotations

INPUTS = ("x",)

# The nn.Module (customops.modules makes it): its class name, and a paragraph for its docstring.
# scaffold: the module's name and a paragraph of its docstring, if any | MODULE = ("QuickGELU",)
MODULE = ("QuickGELU", "A drop-in for ``nn.GELU()`` in models trained with the sigmoid approximation (CLIP's "
          "``QuickGELU``).")
# scaffold-end

# scaffold: the formulas' constants |
ALPHA = 1.702  # kernels/quick_gelu.h kAlpha
# scaffold-end


def forward(m, x):
    # scaffold: f(x) | raise NotImplementedError("TODO(quick_gelu)")
    return x * m.sigmoid(ALPHA * x)
    # scaffold-end


def derivatives(m, x):
    # scaffold: df/dx for each input, the backward op's factors of grad_out | raise NotImplementedError("TODO(quick_gelu)")
    s = m.sigmoid(ALPHA * x)
    return (s + ALPHA * x * s * (1 - s),)
    # scaffold-end


def second_derivatives(m, x):
    # scaffold: d2f/dxi dxj, rows i of columns j, for the backward op's gradients | raise NotImplementedError("TODO(quick_gelu)")
    # With s = sigmoid(a x): f''(x) = a s (1 - s) (2 + a x (1 - 2 s)), as kernels/quick_gelu.h.
    s = m.sigmoid(ALPHA * x)
    return ((ALPHA * s * (1 - s) * (2 + ALPHA * x * (1 - 2 * s)),),)
    # scaffold-end


# How compiled graphs treat the op (customops.inductor): decomposed into these formulas, or kept whole; the
# measurement that decided and why, for docs/design/compile.md (MyST Markdown).
# scaffold: the compiled-graph choice and its measurement | COMPILED = (True, "TODO", "TODO")
COMPILED = (True, "CLIP ViT-B MLP 64x197x768: bf16 0.98 / 1.04, float32 1.00 / 1.00",
            "an elementwise map: Inductor's code is as fast and fuses it with the bias add and the gradient's "
            "neighbours")
# scaffold-end
