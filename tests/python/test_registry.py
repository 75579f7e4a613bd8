"""Every registered customops operator is in the test table, has every kernel, and keeps no scaffold stub."""

from pathlib import Path

import pytest
import torch

import customops
from customops.dev import new_op
from op_db import OP_DB

pytestmark = pytest.mark.torch_dependent


def registered_ops() -> list[str]:
    return customops._library.registered_ops()


@pytest.mark.every_op
def test_every_registered_op_is_in_the_table():
    tested = {op.name for op in OP_DB}
    for name in registered_ops():
        base = name.removesuffix("_backward")
        assert base in tested, f"customops::{name} has no OpInfo in tests/python/op_db/"


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


# What the generic tests beyond test_ops.py read from every OpInfo: test_properties.py, test_fuzz.py, test_onnx.py
# and distributed_checks.py take the op's part from these fields alone.
GENERIC_TEST_FIELDS = ("cases", "property_cost", "fuzz_call", "onnx_nodes", "sharding_cases")


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_every_op_has_what_the_generic_tests_need(op):
    for name in GENERIC_TEST_FIELDS:
        value = getattr(op, name, None)
        assert value is not None, f"{op.name}: OpInfo.{name} is missing"
        if name == "property_cost":
            assert isinstance(value, (int, float)) and value > 0, f"{op.name}: property_cost {value!r}"
        else:
            assert callable(value), f"{op.name}: OpInfo.{name} is not callable"


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("op", OP_DB, ids=str)
def test_no_scaffold_todo_is_left(op):
    # The scaffold (customops.dev.new_op) marks every place it leaves work with one marker, TODO(<op>), in code,
    # strings, docstrings, table cells and the metadata values to choose; some of those pass every other test (a
    # docs line, a compiled-graph measurement, a cost), so this one fails until each is replaced.
    left = new_op.todos_left(ROOT, op.name)
    assert not left, f"{op.name}: the scaffold's stubs are left at {', '.join(left)}"
