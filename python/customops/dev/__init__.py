"""Tools for the engineers who add operators to customops (they work on a source checkout):

    python -m customops.dev.new_op NAME --like quick_gelu    # the skeleton of every file a new op needs
"""
