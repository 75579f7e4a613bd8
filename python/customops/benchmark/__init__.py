"""Benchmarks: every op against its plain-PyTorch equivalent, in one run.

    python -m customops.benchmark [--device cuda] [--markdown docs/x.md] [--plot docs/x.png]

The cases live in customops.benchmark.ops, one module per family (customops.benchmark.table gathers them).
"""
