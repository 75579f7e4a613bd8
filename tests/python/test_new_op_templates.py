"""The templates of operators with kernels of their own (customops/dev/templates/<shape>/, `--like one_input`):
what each writes for a new op, that its placeholders are the one marker the TODO check finds, and that a new op from
one builds (CPU only, in a copy of the tracked sources) and fails its op's test run until its TODOs are done.

The built tests are heavy: one build of a copy (about five minutes on a busy 2-core machine with a warm compiler
cache; the first run on a machine compiles the new ops' objects once), and, with CUSTOMOPS_FULL_TESTS=1, the
first template's op with its maths written, rebuilt and put through the value, gradient, compile and torch.func
tests."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from customops.dev import new_op, template_op
from conftest import FULL_TESTS
from source_tree import build_copy, build_env, copy_tracked_sources

pytestmark = pytest.mark.torch_independent

ROOT = Path(__file__).resolve().parents[2]
NAME = "template_probe"
TEMPLATES = template_op.names()
TOKENS = ("__op__", "__Op__", "__OP__")

# The places of new_op.FAMILY_PLACES a template fills: every concern an op with kernels of its own must have, and
# its Inductor decomposition (which litert-torch and ExecuTorch also convert by). Not: a pointwise family's
# formulas, an ExecuTorch kernel (--like trilinear_interpolation --executorch), host code too big for the header,
# litert-torch's or ExecuTorch's own decompositions.
PLACES = ("kernels/{family}.h", "kernels/cpu/{family}.cpp", "kernels/cuda/{family}/{family}.cu",
          "kernels/meta/{family}.cpp", "registration/{family}.cpp", "ops/include/customops/{family}.h",
          "python/customops/functional/{family}.py", "python/customops/modules/{family}.py",
          "python/customops/func/{family}.py", "python/customops/sharding/{family}.py",
          "python/customops/onnx/{family}.py", "python/customops/inductor/{family}.py",
          "tests/python/op_db/{family}.py", "python/customops/benchmark/ops/{family}.py")


def _text(plan) -> dict:
    return {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}


def test_the_templates_are_listed_and_named_apart_from_the_ops():
    assert {"one_input", "two_inputs"} <= set(TEMPLATES)
    schemas = (ROOT / "registration/schemas.cpp").read_text()
    for template in TEMPLATES:
        assert not re.search(rf'm\.def\("{template}[(.]', schemas), f"{template} is also an op's name"
        assert len(template_op.about(template)) > 40
    usage = subprocess.run([sys.executable, "-m", "customops.dev.new_op", "--help"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert usage.returncode == 0 and all(f"{t}:" in " ".join(usage.stdout.split()) for t in TEMPLATES)


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_is_valid_code_as_stored(template):
    # Its tokens are identifiers: each file parses as it is, and names no other op.
    for rel, text in template_op.sources(template).items():
        if rel.endswith(".py"):
            ast.parse(text, rel)
        assert "trilinear" not in text and "TODO(" not in text.replace("TODO(__op__)", ""), rel


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_writes_every_concern_under_the_ops_names(template):
    plan = new_op.plan_op(ROOT, NAME, template)
    text = _text(plan)
    assert plan.template == template and plan.family == NAME
    assert sorted(text) == sorted([p.format(family=NAME) for p in PLACES] + ["registration/schemas.cpp"])
    patterns = [p for p, _ in new_op.FAMILY_PLACES]
    for rel in text:
        if rel != "registration/schemas.cpp":
            assert any(rel.startswith(p.format(family=NAME)) for p in patterns), f"{rel}: not a family's place"
    for rel, source in text.items():
        assert not any(token in source for token in TOKENS), rel
        if rel.endswith(".py"):
            compile(source, rel, "exec")
    # The schemas after the others, a TODO for the op's own arguments above them.
    schemas = text["registration/schemas.cpp"]
    assert schemas.startswith((ROOT / "registration/schemas.cpp").read_text().split("\n}\n")[0])
    assert f'  m.def("{NAME}(Tensor ' in schemas and f'  m.def("{NAME}_backward(Tensor grad_out, ' in schemas
    assert re.search(rf"// TODO\({NAME}\): the op's arguments.*\n.*\n  m\.def\(\"{NAME}\(", schemas)
    # The C++ names: the family's namespace beside the op's function, the classes from the class name.
    header = text[f"kernels/{NAME}.h"]
    assert f"namespace {NAME}_impl {{" in header and "struct TemplateProbe" not in header
    assert "class TemplateProbeFunction" in text[f"registration/{NAME}.cpp"]
    assert f"TEMPLATE_PROBE = OpInfo(" in text[f"tests/python/op_db/{NAME}.py"]
    assert "class TemplateProbe(nn.Module)" in text[f"python/customops/modules/{NAME}.py"]
    # What is the same for every op of the shape is code, not a TODO: every dispatch key and both autocast keys,
    # the autograd of the op, the kernels' loops; what differs is one.
    registration = text[f"registration/{NAME}.cpp"]
    for key in ("CPU", "CUDA", "Meta", "Autograd"):
        assert f"TORCH_LIBRARY_IMPL(customops, {key}, m)" in registration, key
    assert f'CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE("{NAME}", "{NAME}_backward")  // TODO({NAME})' in registration
    for kernels in (f"kernels/cpu/{NAME}.cpp", f"kernels/cuda/{NAME}/{NAME}.cu", f"kernels/meta/{NAME}.cpp"):
        assert "TODO" not in text[kernels], kernels
    assert header.count(f"return opmath_t(NAN);  // TODO({NAME})") == (2 if template == "one_input" else 3)
    assert f"// TODO({NAME}): the result's sizes" in header
    assert len(plan.todos) >= 40 and all(todo.split(":")[0] in text for todo in plan.todos)


def test_a_third_input_or_the_executorch_kernel_is_not_a_templates():
    with pytest.raises(SystemExit, match="takes no --inputs or --executorch"):
        new_op.plan_op(ROOT, NAME, "one_input", executorch=True)
    with pytest.raises(SystemExit, match="takes no --inputs or --executorch"):
        new_op.plan_op(ROOT, NAME, "two_inputs", inputs=["a", "b", "c"])


# Lines whose value is a placeholder: each must hold the marker itself, so that it stays flagged once a contributor
# deletes the TODO comments above it.
STUBS = ("NotImplementedError", "opmath_t(NAN)", "TORCH_CHECK(false", "property_cost=", "DECOMPOSED_BY_DEFAULT =",
         "onnx_nodes=", "bytes=", "CUSTOMOPS_AUTOCAST_KEEP_INPUT_DTYPE(", "@_overview(", "layouts=", 'r"""',
         "shapes = ", "return x.sym",
         "return a.sym")


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_placeholder_is_the_marker_the_check_finds(tmp_path, template):
    plan = new_op.plan_op(ROOT, NAME, template)
    files = {rel: t for rel, t in _text(plan).items() if rel != "registration/schemas.cpp"}
    marker = new_op.marker(NAME)
    other = [f"{rel}:{i}: {line.strip()}" for rel, text in files.items()
             for i, line in enumerate(text.splitlines(), 1) if re.search(rf"TODO(?!\({NAME}\))", line)]
    assert not other, f"placeholders in another form than {marker}, which the check would miss: {other}"
    comment = re.compile(rf"^\s*(//|#) {re.escape(marker)}")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("".join(l for l in text.splitlines(keepends=True) if not comment.match(l)))
    flagged = set(new_op.todos_left(tmp_path, NAME))
    stubs = {f"{rel}:{i}": line.strip() for rel in files
             for i, line in enumerate((tmp_path / rel).read_text().splitlines(), 1) if any(s in line for s in STUBS)}
    missed = [f"{where}: {line}" for where, line in stubs.items() if where not in flagged]
    assert not missed, f"placeholders that pass the check once their comment goes: {missed}"
    # Every file but the kernels, the module and the C++ API (whose TODO is its comment) keeps a flagged line.
    assert len(stubs) >= 25 and {where.split(":")[0] for where in flagged} == {
        p.format(family=NAME) for p in PLACES if not p.startswith(("kernels/cpu/", "kernels/cuda/", "kernels/meta/",
                                                                   "python/customops/modules/", "ops/include/"))}


# --- built ---------------------------------------------------------------------------------------------------------

BUILT = {"one_input": "template_one", "two_inputs": "template_two"}


def _run(tree: Path, script: str, env: dict, timeout: int = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], cwd=tree, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A copy of the tracked sources with an op of the first template, built whole (CPU only), and the second
    template's op's registration and CPU kernel compiled, which hold what it has beyond the first's (a gradient of
    each of two inputs, the mask): (tree, the environment and python that load the copy's package, the builds)."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("no cmake or ninja")
    tree = tmp_path_factory.mktemp("templates") / "customops"
    copy_tracked_sources(tree)
    assert new_op.main([BUILT["one_input"], "--like", "one_input", "--root", str(tree)]) == 0
    env = build_env()
    build_log = build_copy(tree, "-DCUSTOMOPS_BUILD_TESTS=OFF")
    # Its C++ files alone: its Python modules would refer to an op the library, not linked again, lacks.
    two = BUILT["two_inputs"]
    for path, text in new_op.plan_op(tree, two, "two_inputs").writes.items():
        if path.suffix in (".h", ".cpp", ".cu") and path.name != "schemas.cpp":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    objects = [f"CMakeFiles/customops.dir/registration/{two}.cpp.o",
               f"CMakeFiles/customops_cpu_DEFAULT.dir/kernels/cpu/{two}.cpp.o"]
    compiled = _run(tree, f"ROOT={shlex.quote(str(tree))}; source scripts/caches.sh && cmake build >/dev/null && "
                    f"ninja -C build {' '.join(objects)}", env)
    assert compiled.returncode == 0, compiled.stdout[-3000:] + compiled.stderr[-3000:]
    # The copy's package, not one an editable install maps `customops` to whatever the path says (its finder,
    # which a .pth file installs, goes first): without the site module, with the packages on the path.
    packages = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    env.update(CUSTOMOPS_LIBRARY=str(tree / "build" / "libcustomops.so"), CUSTOMOPS_BUILD_DIR=str(tree / "build"),
               PYTHONPATH=os.pathsep.join([str(tree / "python"), *sorted(packages)]))
    return tree, env, [sys.executable, "-S"], build_log + compiled.stdout


def test_a_new_op_from_a_template_builds_and_fails_its_run_until_its_todos_are_done(built):
    tree, env, python, log = built
    warned = [line for line in log.splitlines()
              if "warning:" in line and any(f"{op}." in line for op in BUILT.values())]
    assert not warned, f"the templates' code compiles without warnings: {warned}"
    one = BUILT["one_input"]
    # The op runs, and its stub maths is NaN on the CPU, of the shape the Meta kernel gives.
    probe = subprocess.run(
        [*python, "-c", f"import torch, customops; x = torch.randn(3, 5); y = customops.{one}(x); "
         f"assert y.isnan().all() and y.shape == torch.ops.customops.{one}(x.to('meta')).shape, y; "
         "print(customops.__file__)"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert probe.returncode == 0, probe.stdout[-3000:] + probe.stderr[-3000:]
    assert probe.stdout.strip() == str(tree / "python" / "customops" / "__init__.py")
    # The op's run (the guide's "done" command; here its registry tests) fails on the TODOs, and only there.
    run = subprocess.run([*python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                          "tests/python/test_registry.py", "--op", one], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"PASSED tests/python/test_registry.py::test_kernels_for_every_key[{one}]" in run.stdout
    assert f"PASSED tests/python/test_registry.py::test_kernels_for_every_key[{one}_backward]" in run.stdout
    failed = sorted(re.findall(r"^FAILED tests/python/test_registry.py::(\w+)", run.stdout, re.M))
    assert failed == ["test_every_op_has_what_the_generic_tests_need", "test_no_scaffold_todo_is_left"], run.stdout
    assert f"the scaffold's stubs are left at kernels/{one}.h:" in run.stdout


def _moving_sum(op: str) -> dict:
    """The first template's TODOs for a sum over windows of 3 along the last dimension, as a contributor writes
    them (path -> (TODO line or stub, what replaces it)): the maths of every path the value, gradient, compile,
    export and torch.func tests take."""
    m = f"TODO({op})"
    return {
        f"kernels/{op}.h": [
            (f"  // {m}: x's rank and sizes, and the op's other arguments: "
             "TORCH_CHECK(cond, \"customops::\", op, ...).",
             '  TORCH_CHECK(x.dim() >= 1 && checks::holds(x.sym_size(-1) >= 3), "customops::", op,\n'
             '              ": expected x of 3 or more elements in its last dimension, got ", x.sym_sizes());'),
            (f"  return x.sym_sizes().vec();  // {m}: the result's sizes from x's (and the op's arguments)",
             "  auto sizes = x.sym_sizes().vec();\n  sizes.back() = sizes.back() - 2;\n  return sizes;"),
            (f"  // {m}: the sizes the element functions need: the rows, the window, the reduced dimension's size.",
             "  int64_t length = 0;  // x's last dimension"),
            (f"  // {m}: the other fields of Sizes, from x's sizes (contiguous) and the op's arguments.",
             "  s.length = x.size(-1);"),
            (f"  return opmath_t(NAN);  // {m}: the result's element i, from the elements of x it reads",
             "  const int64_t n = s.length - 2;\n  const scalar_t* r = x + i / n * s.length + i % n;\n"
             "  return static_cast<opmath_t>(r[0]) + static_cast<opmath_t>(r[1]) + static_cast<opmath_t>(r[2]);"),
            (f"  return opmath_t(NAN);  // {m}: x's gradient at j, from grad_out (the result's shape) and x",
             "  const int64_t n = s.length - 2, row = j / s.length, p = j % s.length;\n  opmath_t sum = 0;\n"
             "  for (int64_t o = p < 2 ? 0 : p - 2; o <= p && o < n; ++o) "
             "sum += static_cast<opmath_t>(grad_out[row * n + o]);\n  return sum;"),
        ],
        f"registration/{op}.cpp": [
            (f'    TORCH_CHECK(false, "customops::{op}_backward: {m}: its gradients (the double backward)");\n'
             "    return {at::Tensor(), at::Tensor()};",
             f"    return {{detail::{op}_op().call(grads[0]), at::Tensor()}};"),
        ],
        f"python/customops/func/{op}.py": [
            (f'        raise NotImplementedError("{m}: the forward-mode formula")', f"        return ops.{op}(t_x)"),
            (f'        raise NotImplementedError("{m}: the backward op\'s gradients")',
             f"        return ops.{op}(a), None"),
            (f'        raise NotImplementedError("{m}: the backward op\'s forward-mode formula")',
             f"        _, x = ctx.saved_tensors\n        return torch.zeros_like(x) if t_g is None else "
             f"ops.{op}_backward(t_g, x)"),
        ],
        f"python/customops/inductor/{op}.py": [
            (f'DECOMPOSED_BY_DEFAULT = "{m}: True (decomposed) or False (kept whole), as measured"',
             "DECOMPOSED_BY_DEFAULT = True"),
            (f'    raise NotImplementedError("{m}: the forward in ATen operations")',
             "    return x[..., :-2] + x[..., 1:-1] + x[..., 2:]"),
            (f'    raise NotImplementedError("{m}: the backward in ATen operations")',
             "    pad = torch.nn.functional.pad\n    return pad(grad_out, (0, 2)) + pad(grad_out, (1, 1)) + "
             "pad(grad_out, (2, 0))"),
        ],
        f"tests/python/op_db/{op}.py": [
            (f'    raise NotImplementedError("{m}: the reference")',
             "    return x[..., :-2] + x[..., 1:-1] + x[..., 2:]"),
            (f'    raise NotImplementedError("{m}: the samples")',
             "    for shape in ((5, 7), (3,), (2, 3, 4), (0, 5), (4, 33)):\n"
             "        yield SampleInput((t(shape),), name=str(shape))\n"
             '    yield SampleInput((t((6, 5), noncontiguous=True),), name="noncontiguous")\n'
             '    yield SampleInput((t((5, 6)).t(),), name="transposed")'),
            (f'    raise NotImplementedError("{m}: the dynamic-shape samples")',
             "    for n, k in ((5, 4), (7, 9), (11, 13)):\n"
             '        yield SampleInput((make_tensor((n, k), device=device, dtype=dtype),), name=f"{n}x{k}")'),
            (f'    raise NotImplementedError("{m}: the autocast samples")',
             "    yield SampleInput((make_tensor((4, 9), device=device, dtype=low, requires_grad=requires_grad),), "
             'name="low")'),
            (f'    raise NotImplementedError("{m}: the bad inputs of the op\'s own checks")',
             '    yield ErrorInput(SampleInput((x[:, :2],)),\n'
             '                     r"expected x of 3 or more elements in its last dimension")'),
        ],
    }


@pytest.mark.skipif(not FULL_TESTS, reason="build-heavy, a rebuild and two test files: CUSTOMOPS_FULL_TESTS=1")
def test_a_templates_code_is_right_once_its_maths_is_written(built):
    # What a contributor writes for a windowed op (its maths, its shapes, its reference and samples) is all that
    # the value, gradient (twice), Meta, opcheck, compile, export, TorchScript, autocast and torch.func tests need:
    # the rest of the template's code is right as it is.
    tree, env, python, _ = built
    one = BUILT["one_input"]
    for rel, edits in _moving_sum(one).items():
        text = (tree / rel).read_text()
        for old, new in edits:
            assert old in text, f"{rel}: {old}"
            text = text.replace(old, new)
        (tree / rel).write_text(text)
    build_copy(tree)
    run = subprocess.run([*python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/python/test_ops.py",
                          "tests/python/test_func.py", "--op", one, "-k", "not cuda"], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    assert re.search(r"(\d+) passed", run.stdout) and int(re.search(r"(\d+) passed", run.stdout)[1]) >= 25
