"""Every registered customops operator is in the test table and has every kernel."""

import pytest
import torch

import customops
from op_db import OP_DB


def registered_ops() -> list[str]:
    return sorted(n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("customops::"))


def test_every_registered_op_is_in_the_table():
    tested = {op.name for op in OP_DB}
    for name in registered_ops():
        base = name.removesuffix("_backward")
        assert base in tested, f"customops::{name} has no entry in tests/python/op_db.py"


@pytest.mark.parametrize("name", registered_ops())
def test_kernels_for_every_key(name):
    # Each op states its autocast policy (registration/autocast.h), also where it is a pass-through.
    keys = ["CPU", "Meta", "Autograd", "AutocastCPU", "AutocastCUDA"]
    if customops.build_info().get("cuda"):
        keys.append("CUDA")
    for key in keys:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"customops::{name}", key), f"{name}: no {key} kernel"
    assert torch.Tag.pt2_compliant_tag in getattr(torch.ops.customops, name).default.tags


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_functional_and_module_are_exported_and_documented(op):
    assert op.op is getattr(customops, op.name)
    assert op.op.__doc__ and len(op.op.__doc__) > 80
