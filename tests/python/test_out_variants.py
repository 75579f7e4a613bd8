"""The out variants (``customops::<op>.out``), which ExecuTorch's programs call for the ops its runtime runs with
customops' kernels: in PyTorch each is the op, its result written into ``out`` as ATen's out= functions do."""

from __future__ import annotations

import re

import pytest
import torch

import customops
from op_db import OP_DB, OpInfo

pytestmark = pytest.mark.torch_dependent

OUT_OPS = [op for op in OP_DB if "out" in getattr(torch.ops.customops, op.name).overloads()]


@pytest.mark.every_op
def test_every_op_customops_runs_in_executorch_has_an_out_variant():
    assert {op.name for op in OUT_OPS} == customops.executorch.kernel_ops()


@pytest.mark.parametrize("op", OUT_OPS, ids=str)
def test_out_variant_writes_the_ops_result(op: OpInfo):
    out_variant = getattr(torch.ops.customops, op.name).out
    for dtype in (torch.float32, torch.float64):
        # The out variant is .default's (what ExecuTorch's kernels run); other overloads have none.
        for sample in (s for s in op.sample_inputs("cpu", dtype, False) if s.overload == "default"):
            want = op.overload(*sample.args, **sample.kwargs)
            out = torch.empty(0, dtype=dtype)  # resized to the result
            returned = out_variant(*sample.args, **sample.kwargs, out=out)
            assert returned is out
            torch.testing.assert_close(out, want, rtol=0, atol=0, msg=lambda m: f"{sample.name}: {m}")
            same = torch.full_like(want, float("nan"))  # written in place where its size is right
            pointer = same.data_ptr()
            out_variant(*sample.args, **sample.kwargs, out=same)
            assert same.data_ptr() == pointer
            torch.testing.assert_close(same, want, rtol=0, atol=0)


@pytest.mark.parametrize("op", OUT_OPS, ids=str)
def test_out_variant_refuses_another_dtype(op: OpInfo):
    sample = next(iter(op.sample_inputs("cpu", torch.float32, False)))
    out_variant = getattr(torch.ops.customops, op.name).out
    with pytest.raises(RuntimeError, match=rf"customops::{op.name}.out: expected out of dtype Float, got Double"):
        out_variant(*sample.args, **sample.kwargs, out=torch.empty(0, dtype=torch.float64))


def _raises(fn, error) -> bool:
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (a wrapper's argument the overload cannot even bind)
        return isinstance(e, error.error) and bool(re.search(error.match, str(e)))
    return False


@pytest.mark.parametrize("op", OUT_OPS, ids=str)
def test_out_variant_checks_the_arguments_as_the_op(op: OpInfo):
    # The error inputs the op's own overload refuses (the others are the Python wrapper's arguments).
    out_variant = getattr(torch.ops.customops, op.name).out
    checked = 0
    for error in (e for e in op.error_inputs("cpu") if not e.backward):
        args, kwargs = error.sample.args, error.sample.kwargs
        if _raises(lambda: op.overload(*args, **kwargs), error):
            with pytest.raises(error.error, match=error.match):
                out_variant(*args, **kwargs, out=torch.empty(0))
            checked += 1
    assert checked
