"""torch.func support (grad, vjp, jacrev, jvp, jacfwd, vmap and their
compositions, eager and under torch.compile) for every customops operator.

Importing this package registers, per operator and per backward operator, a
Python autograd.Function with a vmap rule and a forward-mode (jvp) formula;
the dispatcher calls it only while a torch.func transform is active
(_common.py says why), so plain autograd, TorchScript and C++ programs keep the
C++ Autograd kernels. One module per family, as registration/<family>.cpp.
"""

from .._families import family_modules

FAMILIES = family_modules(__name__, __path__)  # importing each registers its operators
