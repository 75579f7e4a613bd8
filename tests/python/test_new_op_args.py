"""Scalar arguments of pointwise ops (customops._scalar_args): the scaffold's --args, what it writes for them, and
the fixture op (tests/python/fixtures/softcap.py, `cap * tanh(x / cap)`) written by it and filled in as the guide
says, built in a copy of the checkout (CPU only, through the scripts' compiler cache) and tested there with the
generic tests of `--op softcap`; one wrong value in any of its formulas, C++ or Python, fails them.

Build-heavy: the last two tests build a copy of the checkout (minutes with a warm compiler cache) and rebuild the
op's few objects once per mutation."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from customops import _scalar_args
from customops.deploy import tflite_env
from customops.dev import new_op
from fixtures import softcap as fixture
from source_tree import build_copy, copy_tracked_sources

pytestmark = pytest.mark.torch_independent

ROOT = Path(__file__).resolve().parents[2]
NAME = "scaffold_probe"
ARGS = ["cap:float>0", "n:int>=1<=8=2", "flag:bool=false", "mode:{none,tanh}=none"]


@pytest.mark.parametrize("spec,schema,cpp,valid,invalid", [
    ("cap:float>0", "float cap", 'pw::Arg::real("cap").gt(0)', [0.5, 2.0, 1.0], [0.0]),
    ("alpha:float=1.5", "float alpha=1.5", 'pw::Arg::real("alpha")', [1.5, 1.0, 0.5], []),
    ("p:float>=0<1=0.5", "float p=0.5", 'pw::Arg::real("p").ge(0).lt(1)', [0.5, 0.0], [-1.0, 1.0]),
    ("n:int>=1<=8=2", "int n=2", 'pw::Arg::integer("n").ge(1).le(8)', [2, 3, 8], [0, 9]),
    ("flag:bool=true", "bool flag=True", 'pw::Arg::boolean("flag")', [True, False], []),
    ("mode:{none,tanh}=tanh", 'str mode=\\"tanh\\"', 'pw::Arg::choice("mode", "none,tanh")', ["tanh", "none"],
     ["not_an_option"]),
])
def test_an_argument_spec_gives_its_schema_kernel_entry_and_values(spec, schema, cpp, valid, invalid):
    arg = _scalar_args.parse(spec)
    assert (arg.schema(), arg.cpp(), arg.valid_values(), arg.invalid_values()) == (schema, cpp, valid, invalid)
    assert _scalar_args.parse(arg.spec()) == arg
    assert all(arg.accepts(v) for v in valid) and not any(arg.accepts(v) for v in invalid)


def test_bad_argument_specs_are_refused():
    for spec, why in (("cap", "is not name:type"), ("cap:double", "is not name:type"), ("b:bool>0", "has no range"),
                      ("m:{a}", "two or more"), ("m:{a,b}=c", "not one of its options"),
                      ("cap:float>0=-1", "out of the range"), ("n:int>1<1", "no value is in the range"),
                      ("n:int=x", "is not a int")):
        with pytest.raises(SystemExit, match=why):
            _scalar_args.parse(spec)
    assert _scalar_args.split("cap:float>0, mode:{a,b}=a") == ["cap:float>0", " mode:{a,b}=a"]
    with pytest.raises(SystemExit, match="distinct"):
        new_op.plan_op(ROOT, NAME, None, None, inputs=["x"], args=["x:float"])
    with pytest.raises(SystemExit, match="scalar arguments of a pointwise op"):
        new_op.plan_op(ROOT, NAME, "trilinear_interpolation", None, args=["cap:float>0"])


def test_a_pointwise_op_is_written_for_its_arguments(tmp_path):
    plan = new_op.plan_op(ROOT, NAME, None, None, inputs=["x"], args=ARGS)
    text = {p.relative_to(ROOT).as_posix(): t for p, t in plan.writes.items()}
    assert len(text) == 7  # as without arguments: six files of its own and the schemas
    header = text[f"kernels/{NAME}.h"]
    assert ('static constexpr pw::Arg kArgs[] = {pw::Arg::real("cap").gt(0), pw::Arg::integer("n").ge(1).le(8), '
            'pw::Arg::boolean("flag"), pw::Arg::choice("mode", "none,tanh")};') in header
    for formula in ("T forward(", "pw::Values<T, 1> derivatives(", "pw::Values<T, 1> second_derivatives("):
        assert f"{formula}const pw::Args<4>& args, T x)" in header, formula
    assert header.count("const T cap = T(args[0]);") == 3 and header.count("const bool flag = args[2] != 0;") == 3
    assert "const int mode = static_cast<int>(args[3]);  // 0: none, 1: tanh" in header
    schemas = text["registration/schemas.cpp"]
    scalars = 'float cap, int n=2, bool flag=False, str mode=\\"none\\"'
    assert f'm.def("{NAME}(Tensor x, {scalars}) -> Tensor", pt2);' in schemas
    assert f'm.def("{NAME}.out(Tensor x, {scalars}, *, Tensor(a!) out) -> Tensor(a!)");' in schemas
    assert f'm.def("{NAME}_backward(Tensor grad_out, Tensor x, {scalars}) -> Tensor", pt2);' in schemas
    try:  # the schemas as the dispatcher reads them (torch, where this environment has it)
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        for literal in re.findall(r'm\.def\(("' + NAME + r'(?:[^"\\]|\\.)*")', schemas):
            parsed = torch._C.parse_schema(ast.literal_eval(literal))
            assert [a.name for a in parsed.arguments][-4:] in (["cap", "n", "flag", "mode"], ["n", "flag", "mode", "out"])
    api = text[f"ops/include/customops/{NAME}.h"]
    cpp = 'double cap, int64_t n = 2, bool flag = false, c10::string_view mode = "none"'
    assert f"inline at::Tensor {NAME}(const at::Tensor& x, {cpp})" in api and "op.call(x, cap, n, flag, mode)" in api
    functional = text[f"python/customops/functional/{NAME}.py"]
    assert f"def {NAME}(x: Tensor, cap: float, n: int = 2, flag: bool = False, mode: str = 'none') -> Tensor:" \
        in functional and f"torch.ops.customops.{NAME}(x, cap, n, flag, mode)" in functional
    assert f"cap: TODO({NAME}): what it sets; cap > 0." in functional
    formulas = {}
    exec(compile(text[f"python/customops/pointwise/{NAME}.py"], "formulas.py", "exec"), formulas)
    assert [_scalar_args.parse(s) for s in formulas["ARGS"]] == [_scalar_args.parse(s) for s in ARGS]
    for f in ("forward", "derivatives", "second_derivatives"):
        with pytest.raises(NotImplementedError, match=rf"TODO\({NAME}\)"):
            formulas[f](None, "x", 0.5, 2, False, "none")
    bench = text[f"python/customops/benchmark/ops/{NAME}.py"]
    assert f"def {NAME}_reference(x: torch.Tensor, cap: float, n: int = 2, flag: bool = False, mode: str = 'none')" \
        in bench and "args=(0.5, 2, False, 'none')" in bench and "ScaffoldProbe(cap=0.5, n=2, flag=False" in bench
    # Every placeholder is the marker the check finds, the arguments' docs included.
    for rel, source in text.items():
        if rel.endswith(".py"):
            compile(source, rel, "exec")
        if rel != "registration/schemas.cpp":
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(source)
        assert not re.search(rf"TODO(?!\({NAME}\))", source), rel
    left = new_op.todos_left(tmp_path, NAME)
    assert all(any(t.startswith(f"{rel}:") for t in left) for rel in text if rel != "registration/schemas.cpp")


def test_the_fixture_is_the_scaffolds_output_filled_in(tmp_path):
    copy_tracked_sources(tmp_path)
    assert new_op.main([*fixture.SCAFFOLD, "--root", str(tmp_path)]) == 0
    fixture.fill(tmp_path)  # fails where the scaffold's text moved
    assert new_op.todos_left(tmp_path, fixture.NAME) == []
    # The guide's budget: at most 7 files (the op's own and registration/schemas.cpp), 3 lines outside its own.
    assert len(fixture.FILLS) + 1 <= 7
    schemas = (tmp_path / "registration/schemas.cpp").read_text().splitlines()
    assert len([line for line in schemas if fixture.NAME in line]) == 3


# --- the fixture op built and tested in a copy of the checkout --------------------------------------------------

# Python in the copy imports the copy's customops, in the tests' child processes too (the fuzzer's): a
# sitecustomize on the path drops the import hook of an editable install of the checkout, which comes first.
_SITECUSTOMIZE = ("import sys\n"
                  "sys.meta_path[:] = [f for f in sys.meta_path\n"
                  "                    if not getattr(f, '__module__', type(f).__module__).startswith('_editable')]\n")
# The generic tests that cover a pointwise op's paths on CPU: kernels against the reference, gradients to second
# order, opcheck, compile (with a dynamic float), export, torch.func, the formulas, errors, the fuzzer, the
# registry's checks, autocast, the property tests, ONNX, TF-Lite (onnx2tf where the checkout has its environment;
# litert-torch where this torch is in its range).
TESTS = ["test_ops.py", "test_pointwise.py", "test_func.py", "test_registry.py", "test_fuzz.py",
         "test_out_variants.py", "test_inductor.py", "test_autocast.py", "test_properties.py", "test_onnx.py",
         "test_tflite.py"]


def _build(tree: Path) -> None:
    build_copy(tree, "-DCMAKE_BUILD_TYPE=Release")


def _pytest(tree: Path, *args: str) -> subprocess.CompletedProcess:
    site = tree / "build" / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "python"), str(site)]),
           "CUSTOMOPS_LIBRARY": str(tree / "build/libcustomops.so"), "CUSTOMOPS_BUILD_DIR": str(tree / "build")}
    try:  # the copy has no TF-Lite environment of its own: the checkout's, where it has one
        env.setdefault("CUSTOMOPS_TFLITE_PYTHON", tflite_env.python())
    except (RuntimeError, FileNotFoundError):
        pass
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--op", fixture.NAME,
                           *args], cwd=tree / "tests/python", capture_output=True, text=True, env=env, timeout=3600)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if shutil.which("ninja") is None or shutil.which("cmake") is None:
        pytest.skip("no cmake or ninja")
    tree = tmp_path_factory.mktemp("softcap") / "customops"
    copy_tracked_sources(tree)
    assert new_op.main([*fixture.SCAFFOLD, "--root", str(tree)]) == 0
    fixture.fill(tree)
    _build(tree)
    return tree


def test_the_fixture_op_passes_the_generic_tests(built):
    done = _pytest(built, *TESTS)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    passed = int(re.search(r"(\d+) passed", done.stdout)[1])
    assert passed >= 45, done.stdout[-2000:]


@pytest.mark.parametrize("mutation", range(len(fixture.MUTATIONS) + len(fixture.PYTHON_MUTATIONS)))
def test_a_wrong_value_in_any_formula_fails(built, mutation):
    kernels = mutation < len(fixture.MUTATIONS)
    if kernels:
        rel, right, wrong, test_file, selection = fixture.MUTATIONS[mutation]
    else:
        rel, right, wrong = fixture.PYTHON_MUTATIONS[mutation - len(fixture.MUTATIONS)]
        test_file, selection = "test_pointwise.py", fixture.NAME
    path = built / rel
    original = path.read_text()
    assert original.count(right) == 1, right
    path.write_text(original.replace(right, wrong))
    try:
        if kernels:
            _build(built)
        done = _pytest(built, test_file, "-k", selection)
    finally:
        path.write_text(original)
        if kernels:
            _build(built)
    assert done.returncode == 1 and re.search(r"\d+ failed", done.stdout), \
        f"{rel}: {wrong!r} passed {test_file} -k {selection}:\n{done.stdout[-3000:]}"
