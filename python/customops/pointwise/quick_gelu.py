"""quick_gelu's formulas: its value and derivatives, for every Python path (see the package's docstring);
kernels/quick_gelu.h holds the kernels' copy."""

from __future__ import annotations

# scaffold: the formulas' constants |
ALPHA = 1.702  # kernels/quick_gelu.h kAlpha
# scaffold-end


def forward(m, x):
    # scaffold: f(x) | raise NotImplementedError("TODO(quick_gelu)")
    return x * m.sigmoid(ALPHA * x)
    # scaffold-end


def derivative(m, x):
    # scaffold: f'(x), the backward op's factor of grad_out | raise NotImplementedError("TODO(quick_gelu)")
    s = m.sigmoid(ALPHA * x)
    return s + ALPHA * x * s * (1 - s)
    # scaffold-end


def second_derivative(m, x):
    # scaffold: f''(x), for the backward op's gradients | raise NotImplementedError("TODO(quick_gelu)")
    # With s = sigmoid(a x): f''(x) = a s (1 - s) (2 + a x (1 - 2 s)), as registration/quick_gelu.cpp.
    s = m.sigmoid(ALPHA * x)
    return ALPHA * s * (1 - s) * (2 + ALPHA * x * (1 - 2 * s))
    # scaffold-end
