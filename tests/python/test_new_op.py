"""The operator scaffold (python -m customops.dev.new_op): what it would write for a new op, started from each
operator that is alone in its family, and the guide that walks it (docs/design/adding_an_operator.md). The
scaffold writes nothing here (plan_op plans; main writes); the build of a scaffolded op is in the guide."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from customops.dev import new_op

ROOT = Path(__file__).resolve().parents[2]
NAME = "scaffold_probe"
SINGLE = ["quick_gelu", "upsample_bilinear2d", "trilinear_interpolation"]


def _new_files(plan):
    return {p: t for p, t in plan.writes.items() if not p.exists()}


@pytest.mark.parametrize("like", SINGLE)
def test_every_family_file_gets_a_renamed_copy(like):
    # Renaming alone (upsample's family marks no maths yet; the next tests check the stubs).
    plan = new_op.plan_op(ROOT, NAME, like, None, unmarked_maths=True)
    family = new_op.family_of(ROOT, like)
    originals = new_op.family_files(ROOT, family)
    new = _new_files(plan)
    assert len(originals) >= 9  # header, kernels per key, registration, C++ API, Python concerns, OpInfo, benchmark
    assert sorted(p.relative_to(ROOT).as_posix() for p in new) == sorted(
        re.sub(rf"(?<![A-Za-z0-9_]){re.escape(family)}(?![A-Za-z0-9])", NAME, str(p.as_posix()).replace(like, NAME))
        for p in originals)
    old_word = re.compile(rf"(?<![A-Za-z0-9])({re.escape(like)}|{re.escape(family)})(?![A-Za-z0-9])")
    for path, text in new.items():
        assert not old_word.search(text), f"{path}: {like} left in {old_word.search(text)[0]!r}"
        assert "scaffold:" not in text and "scaffold-end" not in text, path
        if path.suffix == ".py":
            ast.parse(text, str(path))
    for place in (f"registration/{NAME}.cpp", f"tests/python/op_db/{NAME}.py"):
        assert ROOT / place in new


def test_quick_gelu_maths_become_stubs_the_tests_reject():
    plan = new_op.plan_op(ROOT, NAME, "quick_gelu", None)
    text = {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}
    header = text[f"kernels/{NAME}.h"]
    assert f"// TODO({NAME}): f(x)" in header and "return x;" in header and "struct ScaffoldProbe {" in header
    assert "exp(" not in header and "sigmoid" not in header  # quick_gelu's formulas are gone
    # A pointwise family's kernels and registration are the shared ones, instantiated for it.
    assert "template struct customops::cpu::CPU_CAPABILITY::Pointwise<customops::ScaffoldProbe>;" in \
        text[f"kernels/cpu/{NAME}.cpp"]
    assert "template struct customops::cuda::Pointwise<customops::ScaffoldProbe>;" in text[f"kernels/cuda/{NAME}.cu"]
    assert "CUSTOMOPS_REGISTER_POINTWISE(customops::ScaffoldProbe)" in text[f"registration/{NAME}.cpp"]
    # The Python formulas are stubs; the concerns, the reference and the benchmark's baseline evaluate them.
    formulas = text[f"python/customops/pointwise/{NAME}.py"]
    assert formulas.count(f'raise NotImplementedError("TODO({NAME})")') == 3 and "sigmoid" not in formulas
    for place in ("tests/python/op_db", "python/customops/benchmark/ops"):
        assert f"pointwise import {NAME} as formulas" in text[f"{place}/{NAME}.py"], place
    # torch.func, sharding, ONNX, Inductor, litert-torch and ExecuTorch make their parts from the formulas: no files
    # there.
    for concern in ("func", "sharding", "onnx", "inductor", "litert", "executorch", "modules"):
        assert f"python/customops/{concern}/{NAME}.py" not in text, concern
    # The function (its docs lines and docstring TODOs) and the module, which their packages find and export.
    functional = text[f"python/customops/functional/{NAME}.py"]
    assert f"def {NAME}(x: Tensor) -> Tensor:" in functional and f'@_overview("TODO({NAME})' in functional
    assert 'layouts=("TODO: NCHW"' in functional and f'__all__ = ["{NAME}"]' in functional
    assert f'"""TODO({NAME}): its API page."""' in functional and "sigmoid" not in functional
    compile(functional, "functional.py", "exec")  # the decorator and the function still parse
    assert 'MODULE = ("ScaffoldProbe",)' in formulas  # its nn.Module, which customops.modules makes
    # The shared file: the schemas (<customops/ops.h> is generated from the headers there).
    assert {p.relative_to(ROOT).as_posix() for p in plan.writes if p.exists()} == \
        {place for place, _ in new_op.SHARED_EDITS}
    schemas = text["registration/schemas.cpp"]
    assert f'm.def("{NAME}(Tensor x) -> Tensor", pt2);' in schemas
    assert f'm.def("{NAME}_backward(Tensor grad_out, Tensor x) -> Tensor", pt2);' in schemas
    assert len(plan.todos) >= 14


def test_trilinear_maths_become_stubs_the_tests_reject():
    # The model of an op with a window or gather over several tensors: 17 files of its own (its ExecuTorch kernel
    # and the maths it shares with the CPU kernel among them) and the schemas.
    plan = new_op.plan_op(ROOT, NAME, "trilinear_interpolation", None)
    text = {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}
    assert len(_new_files(plan)) == 17 and len(plan.todos) >= 44
    todo = f'raise NotImplementedError("TODO({NAME})")'
    # Every path's maths is a stub: kernels, Meta shapes, the double backward, the Python concerns, the tests' table.
    for place, stubs in ((f"kernels/cpu/{NAME}.cpp", 2), (f"kernels/cuda/{NAME}/{NAME}.cu", 2)):
        assert text[place].count(f'TORCH_CHECK(false, "customops::{NAME}: TODO");') == stubs, place
        assert "Corners" not in text[place] and "kCorners" not in text[place], place
    assert f'TORCH_CHECK(false, "customops::{NAME}_backward: TODO"); return {{}};' in text[f"registration/{NAME}.cpp"]
    assert "class ScaffoldProbeFunction" in text[f"registration/{NAME}.cpp"]  # the family's class names follow
    # The family's namespace cannot take the op's name: customops::scaffold_probe is the op's C++ function.
    header = text[f"kernels/{NAME}.h"]
    assert f"namespace {NAME}_impl {{" in header and f"namespace {NAME} {{" not in header
    assert f"{NAME}_impl::plan_forward(" in text[f"kernels/cpu/{NAME}.cpp"]
    assert "return at::empty_symint({0}, feats.options());" in text[f"kernels/meta/{NAME}.cpp"]
    for concern, stubs in (("func", 5), ("sharding", 2), ("onnx", 1), ("inductor", 2)):
        assert text[f"python/customops/{concern}/{NAME}.py"].count(todo) == stubs, concern
        assert "einsum" not in text[f"python/customops/{concern}/{NAME}.py"], concern
    assert "DECOMPOSED_BY_DEFAULT = False" in text[f"python/customops/inductor/{NAME}.py"]
    opinfo = text[f"tests/python/op_db/{NAME}.py"]
    assert opinfo.count(todo) == 8 and "_trilinear" not in opinfo and "(1 - u)" not in opinfo and "_term_scales" not in opinfo
    assert f"litert/{NAME}.py" not in " ".join(text)  # litert-torch takes the Inductor decomposition
    # The ExecuTorch kernel and the maths it shares: stubs, the out variant's schema beside the op's.
    assert f'CUSTOMOPS_ET_CHECK(ctx, false, out, "{NAME}", "TODO: the kernel"); return out;' in \
        text[f"kernels/executorch/{NAME}.cpp"]
    assert "forward_rows" not in text[f"kernels/core/{NAME}.h"] and "Corners" not in text[f"kernels/core/{NAME}.h"]
    assert f'EXECUTORCH_LIBRARY(customops, "{NAME}.out"' in text[f"kernels/executorch/{NAME}.cpp"]
    assert f'm.def("{NAME}.out(Tensor feats, Tensor points, *, Tensor(a!) out) -> Tensor(a!)");' in \
        text["registration/schemas.cpp"]
    assert f'KERNELS = {{"{NAME}": "kernel"}}' in text[f"python/customops/executorch/{NAME}.py"]
    for path, source in text.items():
        if path.endswith(".py"):
            compile(source, path, "exec")


def test_refusals():
    with pytest.raises(SystemExit, match="mark no maths"):
        new_op.plan_op(ROOT, NAME, "upsample_bilinear2d", None)
    with pytest.raises(SystemExit, match="several operators"):
        new_op.plan_op(ROOT, NAME, "depthwise_conv2d", None)
    with pytest.raises(SystemExit, match="exists already"):
        new_op.plan_op(ROOT, "quick_gelu", "trilinear_interpolation", None)
    with pytest.raises(SystemExit, match="lower-case identifier"):
        new_op.plan_op(ROOT, "SiluMul", "quick_gelu", None)
    with pytest.raises(SystemExit, match="no registration"):
        new_op.plan_op(ROOT, NAME, "not_an_op", None)


def test_the_guide_names_every_place_the_scaffold_writes():
    guide = (ROOT / "docs/design/adding_an_operator.md").read_text()
    missing = [place for place, _ in new_op.FAMILY_PLACES + new_op.SHARED_EDITS if f"`{place}`" not in guide]
    assert not missing, f"docs/design/adding_an_operator.md does not name {missing}"
    assert "python -m customops.dev.new_op" in guide
