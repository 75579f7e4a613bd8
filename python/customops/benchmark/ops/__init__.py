"""The benchmark's cases and demos, one module per family (each with BENCH_OPS), found by customops.benchmark.table."""
