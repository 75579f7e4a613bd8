"""Tools for the engineers who add operators to customops (they work on a source checkout, built or not yet):

    scripts/new_op.py NAME --inputs a,b          # the skeleton of every file a new pointwise op needs
    scripts/new_op.py NAME --like trilinear_interpolation   # an op with kernels of its own

(scripts/new_op.py is `python -m customops.dev.new_op` with the checkout's python/ on the path: it runs from a fresh
clone, where customops is not importable yet.)
"""
