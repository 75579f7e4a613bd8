"""Tools for the engineers who add operators to customops (they work on a source checkout, built or not yet):

    python -m customops.dev.new_op NAME --inputs a,b          # the skeleton of every file a new pointwise op needs
    python -m customops.dev.new_op NAME --like trilinear_interpolation   # an op with kernels of its own
"""
