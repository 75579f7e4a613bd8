"""The operator scaffold (python -m customops.dev.new_op): what it would write for a new pointwise op of each arity
and for a copy of each operator that is alone in its family, that it runs without a built library, and the guide
that walks it (docs/design/adding_an_operator.md). The scaffold writes nothing here (plan_op plans; main writes);
the build of a scaffolded op is in the guide."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from customops.dev import new_op

pytestmark = pytest.mark.torch_independent

ROOT = Path(__file__).resolve().parents[2]
NAME = "scaffold_probe"
COPIED = ["upsample_bilinear2d", "trilinear_interpolation"]  # alone in their families; pointwise ops are written


def _new_files(plan):
    return {p: t for p, t in plan.writes.items() if not p.exists()}


@pytest.mark.parametrize("like", COPIED)
def test_every_family_file_gets_a_renamed_copy(like):
    # Renaming alone (upsample's family marks no maths yet; the next tests check the stubs).
    plan = new_op.plan_op(ROOT, NAME, like, None, executorch=True, unmarked_maths=True)
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
        assert "scaffold:" not in text and "scaffold-end" not in text and "scaffold-if" not in text, path
        if path.suffix == ".py":
            ast.parse(text, str(path))
    for place in (f"registration/{NAME}.cpp", f"tests/python/op_db/{NAME}.py"):
        assert ROOT / place in new


POINTWISE = [(["--inputs", "x"], ("x",)), (["--like", "quick_gelu"], ("x",)), (["--like", "silu_mul"], ("a", "b")),
             (["--inputs", "u,v,w"], ("u", "v", "w"))]


def _plan(args):
    options = dict(zip(args[::2], args[1::2]))
    inputs = options.get("--inputs")
    return new_op.plan_op(ROOT, NAME, options.get("--like"), None, inputs=inputs and inputs.split(","))


@pytest.mark.parametrize("args,inputs", POINTWISE, ids=lambda v: "-".join(v) if isinstance(v, (list, tuple)) else v)
def test_a_pointwise_op_is_written_for_its_inputs(args, inputs):
    plan = _plan(args)
    text = {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}
    n, first, names = len(inputs), inputs[0], ", ".join(inputs)
    # Its own files (the kernels, Meta kernels, autograd and Python concerns are the shared pointwise ones; CMake
    # writes its kernels' instantiations and registration), and the schemas: 7 files.
    assert sorted(text) == sorted([f"kernels/{NAME}.h", f"ops/include/customops/{NAME}.h",
                                   f"python/customops/functional/{NAME}.py", f"python/customops/pointwise/{NAME}.py",
                                   f"tests/python/op_db/{NAME}.py", f"python/customops/benchmark/ops/{NAME}.py",
                                   "registration/schemas.cpp"])
    header = text[f"kernels/{NAME}.h"]
    # What cmake/CustomopsPointwise.cmake looks for to write the kernels and the registration.
    assert '#include "kernels/core/pointwise.h"' in header.splitlines()
    assert new_op.POINTWISE_STRUCT.findall(header) == ["ScaffoldProbe"]
    assert "kInputs[] = {" + ", ".join(f'"{x}"' for x in inputs) + "};" in header
    t_args = ", ".join(f"T {x}" for x in inputs)
    assert f"static T forward({t_args})" in header and f"return {first};" in header
    assert f"pw::Values<T, {n}> derivatives({t_args})" in header
    assert f"pw::Values<T, {n * n}> second_derivatives({t_args})" in header
    api = text[f"ops/include/customops/{NAME}.h"]
    tensors = ", ".join(f"const at::Tensor& {x}" for x in inputs)
    grads = "at::Tensor" if n == 1 else f"std::tuple<{', '.join(['at::Tensor'] * n)}>"
    assert f"inline at::Tensor {NAME}({tensors})" in api and f"return op.call({names});" in api
    assert f"inline {grads} {NAME}_backward(\n    const at::Tensor& grad_out, {tensors})" in api
    schemas = text["registration/schemas.cpp"]
    args_schema = ", ".join(f"Tensor {x}" for x in inputs)
    assert f'm.def("{NAME}({args_schema}) -> Tensor", pt2);' in schemas
    grads_schema = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    assert f'm.def("{NAME}_backward(Tensor grad_out, {args_schema}) -> {grads_schema}", pt2);' in schemas
    functional = text[f"python/customops/functional/{NAME}.py"]
    assert f"def {NAME}({', '.join(f'{x}: Tensor' for x in inputs)}) -> Tensor:" in functional
    assert f"torch.ops.customops.{NAME}({names})" in functional and f'__all__ = ["{NAME}"]' in functional
    formulas = {}
    exec(compile(text[f"python/customops/pointwise/{NAME}.py"], "formulas.py", "exec"), formulas)
    assert formulas["INPUTS"] == inputs and formulas["MODULE"] == ("ScaffoldProbe",)
    for f in ("forward", "derivatives", "second_derivatives"):
        with pytest.raises(NotImplementedError, match=rf"TODO\({NAME}\)"):
            formulas[f](None, *inputs)
    assert all(f"TODO({NAME})" in cell for cell in formulas["COMPILED"])  # the choice too: a bool would pass
    opinfo = text[f"tests/python/op_db/{NAME}.py"]
    assert f"reference={NAME}_reference" in opinfo and f"module=customops.ScaffoldProbe" in opinfo
    bench = text[f"python/customops/benchmark/ops/{NAME}.py"]
    assert f"def {NAME}_reference({', '.join(f'{x}: torch.Tensor' for x in inputs)})" in bench
    quoted = ", ".join(f'"{x}"' for x in inputs) + ("," if n == 1 else "")
    assert f'_pointwise.cases("{NAME}", customops.{NAME}, {NAME}_reference, ({quoted}), device' in bench
    for path, source in text.items():
        if path.endswith(".py"):
            compile(source, path, "exec")
        assert "sigmoid(" not in source.replace("m.sigmoid, m.tanh", ""), path  # no model's maths
    # Every place of the maths is a TODO, which test_registry.py's test_no_scaffold_todo_is_left rejects.
    for place in (f"kernels/{NAME}.h", f"ops/include/customops/{NAME}.h", f"python/customops/functional/{NAME}.py",
                  f"python/customops/pointwise/{NAME}.py", f"tests/python/op_db/{NAME}.py",
                  f"python/customops/benchmark/ops/{NAME}.py"):
        assert f"TODO({NAME})" in text[place], place
    assert len(plan.todos) >= 12


def test_the_scaffold_runs_before_the_first_build(tmp_path):
    # On a fresh clone there is no library yet; the package still refuses to load without one for anything else.
    env = {**os.environ, "CUSTOMOPS_LIBRARY": str(tmp_path / "missing.so"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "customops.dev.new_op", NAME, "--like", "silu_mul", "--dry-run"],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"new  kernels/{NAME}.h" in run.stdout and not (ROOT / f"kernels/{NAME}.h").exists()
    imported = subprocess.run([sys.executable, "-c", "import customops"], env=env, cwd=tmp_path, capture_output=True,
                              text=True)
    assert imported.returncode != 0 and "missing.so does not exist" in imported.stderr


def test_the_guides_command_runs_on_a_fresh_clone(tmp_path):
    # A fresh clone's python has neither customops nor torch on its path: a venv without site packages stands for
    # it. `python -m customops.dev.new_op` cannot run there; the guide's scripts/new_op.py must.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUSTOMOPS_LIBRARY", "VIRTUAL_ENV")}
    bare = subprocess.run([python, "-m", "customops.dev.new_op", NAME, "--inputs", "x", "--dry-run"], env=env,
                          cwd=tmp_path, capture_output=True, text=True)
    if bare.returncode == 0:
        pytest.skip(f"{python} imports customops: not a fresh clone's python")
    script = ROOT / "scripts" / "new_op.py"
    assert os.access(script, os.X_OK) and script.read_text().startswith("#!/usr/bin/env python3\n")
    run = subprocess.run([python, str(script), NAME, "--inputs", "x", "--dry-run"], env=env, cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"new  kernels/{NAME}.h" in run.stdout and not (ROOT / f"kernels/{NAME}.h").exists()
    guide = (ROOT / "docs/design/adding_an_operator.md").read_text()
    assert "\nscripts/new_op.py my_op --inputs a,b " in guide


PLANS = [*((args, {}) for args, _ in POINTWISE), (["--like", "trilinear_interpolation"], {"executorch": True})]


def _write(plan, root: Path) -> dict:
    """The plan's new files, written under `root` as a checkout that holds only them; relative path -> text."""
    files = {p.relative_to(ROOT).as_posix(): t for p, t in _new_files(plan).items()}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return files


def _stubs(plan) -> list:
    """(file of the copy, stub line) for every stub a copy of a model gets: its `scaffold:` lines', renamed."""
    rename = new_op.renamer(plan)
    return [(rename(rel.as_posix()), rename(m["stub"])) for rel in new_op.family_files(ROOT, plan.family)
            for m in map(new_op._MARK.match, (ROOT / rel).read_text().splitlines()) if m and m["stub"]]


@pytest.mark.parametrize("args,options", PLANS, ids=lambda v: "-".join(v) if isinstance(v, list) else "")
def test_every_placeholder_is_the_marker_the_check_finds(tmp_path, args, options):
    options = {**dict(zip(args[::2], args[1::2])), **options}
    inputs = options.pop("--inputs", None)
    plan = new_op.plan_op(ROOT, NAME, options.pop("--like", None), None, inputs=inputs and inputs.split(","),
                          **options)
    files = _write(plan, tmp_path)
    marker = new_op.marker(NAME)
    other = [f"{rel}:{i}: {line.strip()}" for rel, text in files.items()
             for i, line in enumerate(text.splitlines(), 1) if re.search(rf"TODO(?!\({NAME}\))", line)]
    assert not other, f"placeholders in another form than {marker}, which the check would miss: {other}"
    # A contributor deletes the TODO comments and keeps what was under them: every stub must still fail the check,
    # the values to choose (a bool, a cost) included, which would pass the other tests.
    comment = re.compile(rf"^\s*(//|#) {re.escape(marker)}")
    for rel, text in files.items():
        (tmp_path / rel).write_text("".join(l for l in text.splitlines(keepends=True) if not comment.match(l)))
    flagged = set(new_op.todos_left(tmp_path, NAME))
    lines = {rel: (tmp_path / rel).read_text().splitlines() for rel in files}

    def unflagged(rel, wanted):
        return [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(lines[rel], 1)
                if wanted(line) and f"{rel}:{i}" not in flagged]

    if plan.like is None:
        assert plan.writes and all(any(f.startswith(f"{rel}:") for f in flagged) for rel in files), flagged
        missed = (unflagged(f"kernels/{NAME}.h", lambda l: "return " in l)
                  + unflagged(f"python/customops/pointwise/{NAME}.py",
                              lambda l: "NotImplementedError" in l or l.startswith("COMPILED ="))
                  + unflagged(f"python/customops/functional/{NAME}.py", lambda l: "@_overview(" in l or 'r"""' in l)
                  + unflagged(f"tests/python/op_db/{NAME}.py", lambda l: l.startswith('"""') or "onnx_nodes=" in l)
                  + unflagged(f"python/customops/benchmark/ops/{NAME}.py", lambda l: "NotImplementedError" in l))
    else:
        stubs = _stubs(plan)
        assert all(any(line.strip() == stub.strip() for line in lines[rel]) for rel, stub in stubs)
        # Among them the placeholders that passed every test once their comment went: values to choose, docs rows'
        # cells, docstrings, layouts.
        for kind in ("property_cost=", "DECOMPOSED_BY_DEFAULT =", "layouts=", '"""', f'"{marker}", "{marker}"',
                     "CUSTOMOPS_AUTOCAST_"):
            assert any(kind in stub for _, stub in stubs), kind
        missed = [m for rel, stub in stubs for m in unflagged(rel, lambda l, s=stub: l.strip() == s.strip())]
    assert not missed, f"placeholders that pass the check once their comment goes: {missed}"


def test_every_model_stub_holds_its_ops_marker():
    # A model's stubs are what its copies get: one without the marker would be a placeholder no check finds.
    for d in new_op.TODO_DIRS:
        for path in sorted((ROOT / d).rglob("*")):
            if path.suffix not in new_op.TODO_SUFFIXES or not path.is_file() or "__pycache__" in path.parts:
                continue
            for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = new_op._MARK.match(line)
                if m and m["stub"] and not re.search(r"TODO\([a-z0-9_]+\)", m["stub"]):
                    pytest.fail(f"{path.relative_to(ROOT)}:{i}: the stub {m['stub']!r} holds no TODO(<op>)")


def _cmake_pointwise_ops(tmp_path, headers):
    script = tmp_path / "probe.cmake"
    script.write_text(f'include("{ROOT}/cmake/CustomopsPointwise.cmake")\n'
                      f'customops_pointwise_ops_of("{";".join(map(str, headers))}" names structs)\n'
                      'message("found: ${names} | ${structs}")\n')
    done = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True)
    found = re.search(r"found: (.*) \| (.*)", done.stderr)
    return done, found and (found[1].split(";") if found[1] else [], found[2].split(";") if found[2] else [])


@pytest.mark.skipif(shutil.which("cmake") is None, reason="no cmake")
def test_the_build_takes_only_pointwise_op_headers_for_pointwise_ops(tmp_path):
    # What the build writes kernels and a registration for (cmake/CustomopsPointwise.cmake): a header whose struct
    # derives from pw::Formula, not every header that includes kernels/core/pointwise.h.
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    plan = new_op.plan_op(ROOT, NAME, None, None, inputs=["x"])
    (kernels / f"{NAME}.h").write_text(plan.writes[ROOT / f"kernels/{NAME}.h"])
    (kernels / "shared_formulas.h").write_text(
        '#pragma once\n#include "kernels/core/pointwise.h"\nnamespace customops {\n'
        "struct Tanh {\n};\nstruct Sigmoid {\n};\nstruct Gate {\n};\n}\n")
    (kernels / "plain.h").write_text("#pragma once\nstruct Plan {\n};\n")
    done, found = _cmake_pointwise_ops(tmp_path, sorted(kernels.glob("*.h")))
    assert done.returncode == 0, done.stderr
    assert found == ([NAME], ["ScaffoldProbe"])
    assert new_op.pointwise_inputs(tmp_path, "shared_formulas") is None  # the scaffold agrees (--like)
    (kernels / "two.h").write_text("struct A : pw::Formula {\n};\nstruct B : pw::Formula {\n};\n")
    done, _ = _cmake_pointwise_ops(tmp_path, [kernels / "two.h"])
    assert done.returncode != 0 and "defines 2 structs deriving from pw::Formula" in done.stderr
    # The tree's pointwise ops, as the build finds them, are those with Python formulas, and the scaffold's.
    done, found = _cmake_pointwise_ops(tmp_path, sorted(ROOT.glob("kernels/*.h")))
    formulas = sorted(p.stem for p in (ROOT / "python/customops/pointwise").glob("*.py") if not p.stem.startswith("_"))
    assert done.returncode == 0 and found[0] == formulas and len(formulas) >= 3
    assert [p.stem for p in sorted(ROOT.glob("kernels/*.h")) if new_op.pointwise_inputs(ROOT, p.stem)] == formulas


def test_trilinear_maths_become_stubs_the_tests_reject():
    # The model of an op with a window or gather over several tensors: 17 files of its own with its ExecuTorch
    # kernel and the maths it shares with the CPU kernel (the next test: 14 without), and the schemas.
    plan = new_op.plan_op(ROOT, NAME, "trilinear_interpolation", None, executorch=True)
    text = {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}
    assert len(_new_files(plan)) == 17 and len(plan.todos) >= 44
    assert "out_variant::into" in text[f"registration/{NAME}.cpp"]
    assert f'#include "kernels/core/{NAME}.h"' in text[f"kernels/{NAME}.h"]
    todo = f'raise NotImplementedError("TODO({NAME})")'
    # Every path's maths is a stub: kernels, Meta shapes, the double backward, the Python concerns, the tests' table.
    for place, stubs in ((f"kernels/cpu/{NAME}.cpp", 2), (f"kernels/cuda/{NAME}/{NAME}.cu", 2)):
        assert text[place].count(f'TORCH_CHECK(false, "customops::{NAME}: TODO({NAME})");') == stubs, place
        assert "Corners" not in text[place] and "kCorners" not in text[place], place
    assert f'TORCH_CHECK(false, "customops::{NAME}_backward: TODO({NAME})"); return {{}};' in \
        text[f"registration/{NAME}.cpp"]
    assert "class ScaffoldProbeFunction" in text[f"registration/{NAME}.cpp"]  # the family's class names follow
    # The family's namespace cannot take the op's name: customops::scaffold_probe is the op's C++ function.
    header = text[f"kernels/{NAME}.h"]
    assert f"namespace {NAME}_impl {{" in header and f"namespace {NAME} {{" not in header
    assert f"{NAME}_impl::plan_forward(" in text[f"kernels/cpu/{NAME}.cpp"]
    assert "return at::empty_symint({0}, feats.options());" in text[f"kernels/meta/{NAME}.cpp"]
    for concern, stubs in (("func", 5), ("sharding", 2), ("onnx", 1), ("inductor", 2)):
        assert text[f"python/customops/{concern}/{NAME}.py"].count(todo) == stubs, concern
        assert "einsum" not in text[f"python/customops/{concern}/{NAME}.py"], concern
    assert f'DECOMPOSED_BY_DEFAULT = "TODO({NAME})' in text[f"python/customops/inductor/{NAME}.py"]
    opinfo = text[f"tests/python/op_db/{NAME}.py"]
    assert opinfo.count(todo) == 8 and "_trilinear" not in opinfo and "(1 - u)" not in opinfo and "_term_scales" not in opinfo
    assert f"litert/{NAME}.py" not in " ".join(text)  # litert-torch takes the Inductor decomposition
    # The ExecuTorch kernel and the maths it shares: stubs, the out variant's schema beside the op's.
    assert f'CUSTOMOPS_ET_CHECK(ctx, false, out, "{NAME}", "TODO({NAME}): the kernel"); return out;' in \
        text[f"kernels/executorch/{NAME}.cpp"]
    assert "forward_rows" not in text[f"kernels/core/{NAME}.h"] and "Corners" not in text[f"kernels/core/{NAME}.h"]
    assert f'EXECUTORCH_LIBRARY(customops, "{NAME}.out"' in text[f"kernels/executorch/{NAME}.cpp"]
    assert f'm.def("{NAME}.out(Tensor feats, Tensor points, *, Tensor(a!) out) -> Tensor(a!)");' in \
        text["registration/schemas.cpp"]
    assert f'KERNELS = {{"{NAME}": "kernel"}}' in text[f"python/customops/executorch/{NAME}.py"]
    for path, source in text.items():
        if path.endswith(".py"):
            compile(source, path, "exec")


def test_the_executorch_kernel_is_opt_in():
    plan = new_op.plan_op(ROOT, NAME, "trilinear_interpolation", None)
    text = {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}
    assert len(_new_files(plan)) == 14
    for place in (f"kernels/core/{NAME}.h", f"kernels/executorch/{NAME}.cpp", f"python/customops/executorch/{NAME}.py"):
        assert place not in text, place
    assert "kernels/core/" not in text[f"kernels/{NAME}.h"]
    registration = text[f"registration/{NAME}.cpp"]
    assert "out_variant" not in registration and f"{NAME}.out" not in registration and "scaffold-" not in registration
    assert f"{NAME}.out" not in text["registration/schemas.cpp"]
    assert f'm.def("{NAME}(Tensor feats, Tensor points) -> Tensor", pt2);' in text["registration/schemas.cpp"]


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
    with pytest.raises(SystemExit, match="give --like OP"):
        new_op.plan_op(ROOT, NAME, None, None)
    with pytest.raises(SystemExit, match="distinct lower-case"):
        new_op.plan_op(ROOT, NAME, None, None, inputs=["a", "a"])
    with pytest.raises(SystemExit, match="by its decomposition"):
        new_op.plan_op(ROOT, NAME, "silu_mul", None, executorch=True)


def test_the_guide_names_every_place_the_scaffold_writes():
    guide = (ROOT / "docs/design/adding_an_operator.md").read_text()
    missing = [place for place, _ in new_op.FAMILY_PLACES + new_op.SHARED_EDITS if f"`{place}`" not in guide]
    assert not missing, f"docs/design/adding_an_operator.md does not name {missing}"
    for command in ("scripts/new_op.py", "--inputs", "--like silu_mul", "--executorch",
                    "python -m pytest tests/python --op"):
        assert command in guide, command


@pytest.mark.parametrize("inputs", [("x",), ("a", "b")])
def test_pointwise_benchmark_cases_count_each_tensor_once(inputs):
    from customops.benchmark.ops import _pointwise

    def op(*xs):
        return sum(xs)

    forward, both = _pointwise.cases("probe", op, op, inputs, torch.device("cpu"), (4, 8), (torch.float32,), "4x8")
    n, size = len(inputs), 4 * 8 * 4
    assert forward.bytes == (n + 1) * size  # the inputs read, the output written
    assert both.bytes == (3 * n + 2) * size  # forward; backward: g and the inputs read, their gradients written
    state = both.setup()
    assert set(state) == {*inputs, "g"} and all(state[x].shape == (4, 8) for x in inputs)
    grads = both.ours(state)
    assert len(grads) == n and all(torch.equal(g, state["g"]) for g in grads)
