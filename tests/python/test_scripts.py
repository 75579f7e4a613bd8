"""The test command itself (scripts/test.sh): the README's two commands build alike, so the tests reuse the demo's
build; every test file says which torch legs run it; the end of the run counts each leg and holds it to its time
budget (scripts/test_summary.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch_independent

ROOT = Path(__file__).resolve().parents[2]
LEG_MARKERS = {"torch_independent", "torch_dependent"}


def _module_markers(path: Path) -> set:
    """The names of the pytest.mark.<name> markers in a test module's module-level pytestmark."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute) \
                        and sub.value.attr == "mark":
                    names.add(sub.attr)
    return names


def test_every_test_file_chooses_its_torch_legs():
    # The oldest torch's leg deselects torch_independent; a file that says neither would run there by default,
    # unnoticed either way: each file must choose.
    files = sorted(ROOT.glob("tests/python/test_*.py"))
    assert len(files) > 30
    unchosen = {f.name: sorted(_module_markers(f) & LEG_MARKERS) for f in files
                if len(_module_markers(f) & LEG_MARKERS) != 1}
    assert not unchosen, ("each test file's module-level pytestmark must hold exactly one of "
                          f"pytest.mark.torch_independent or pytest.mark.torch_dependent (pytest.ini): {unchosen}")


def test_the_check_reads_lists_and_single_markers(tmp_path):
    one = tmp_path / "test_one.py"
    one.write_text("import pytest\npytestmark = pytest.mark.torch_dependent\n")
    listed = tmp_path / "test_listed.py"
    listed.write_text("import pytest\npytestmark = [pytest.mark.skipif(True, reason='x'), "
                      "pytest.mark.torch_independent]\n")
    inner = tmp_path / "test_inner.py"
    inner.write_text("import pytest\n\n@pytest.mark.torch_dependent\ndef test_x():\n    pass\n")
    assert _module_markers(one) == {"torch_dependent"}
    assert _module_markers(listed) == {"skipif", "torch_independent"}
    assert _module_markers(inner) == set()


def _settings(script: str, *args: str) -> list:
    """The build settings lines the script prints under CUSTOMOPS_SETTINGS_ONLY=1, from a shell as fresh as a new
    user's: none of the variables the scripts or this test run export."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUSTOMOPS_", "CCACHE_", "CMAKE_")) and k not in ("TORCH_CUDA_ARCH_LIST", "VIRTUAL_ENV")}
    env["CUSTOMOPS_SETTINGS_ONLY"] = "1"
    done = subprocess.run(["bash", str(ROOT / "scripts" / script), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("customops settings:")]


def test_the_tests_build_what_the_demo_built():
    # The README's second command must find the first's build as it is: the same folder, architectures and CMake
    # arguments, or it compiles the whole tree again.
    demo = _settings("demo.sh")
    legs = _settings("test.sh")
    assert len(demo) == 1 and len(legs) == 2, (demo, legs)
    assert legs[0] == demo[0]
    assert f"BUILD_DIR={ROOT}/build " in demo[0]
    # The oldest torch's leg builds apart, into its own folder.
    assert "BUILD_DIR=" in legs[1] and f"BUILD_DIR={ROOT}/build " not in legs[1]
    has_gpu = subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0
    if not has_gpu:
        assert "TORCH_CUDA_ARCH_LIST=9.0 " in demo[0] and "-DCUSTOMOPS_CUDA_PTX_ONLY=ON" in demo[0], demo


def _junit(path: Path, cases: list) -> None:
    """A JUnit file of (name, seconds, outcome) cases, outcome one of passed, failed, error, skipped."""
    body = []
    for name, seconds, outcome in cases:
        inner = "" if outcome == "passed" else f"<{'failure' if outcome == 'failed' else outcome} message='m'/>"
        body.append(f'<testcase classname="tests.python.test_x" name="{name}" time="{seconds}">{inner}</testcase>')
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{"".join(body)}</testsuite>'
                    "</testsuites>")


def _summary(folder: Path, seconds: int, budget: float):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "test_summary.py"), str(folder), "--seconds",
                           str(seconds), "--budget-minutes", str(budget), "--slowest", "3"],
                          capture_output=True, text=True, timeout=60)


def test_summary_counts_each_leg_and_keeps_the_plain_closing_line(tmp_path):
    (tmp_path / "legs.tsv").write_text("newest\tnewest torch\t600\t0\noldest\ttorch 2.11\t300\t1\n"
                                       "sanitized\tsanitized\t120\t0\n")
    _junit(tmp_path / "newest-pytest-1.xml", [("test_a", 3.5, "passed"), ("test_b", 40.0, "passed"),
                                              ("test_c", 0.1, "skipped")])
    _junit(tmp_path / "newest-ctest-2.xml", [("Gtest.one", 1.0, "passed")])
    _junit(tmp_path / "oldest-pytest-3.xml", [("test_a", 2.0, "failed"), ("test_d", 1.0, "error")])
    _junit(tmp_path / "sanitized-pytest-4.xml", [("test_e", 7.0, "passed")])
    done = _summary(tmp_path, 1020, 60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "customops: 4 passed, 2 failed, 1 skipped"
    legs = "\n".join(lines)
    assert "newest torch" in legs and "3 passed, 0 failed, 1 skipped" in legs
    assert "0 passed, 2 failed, 0 skipped  (exit status 1)" in legs
    slowest = lines[lines.index("customops: the slowest 3 tests of the run (seconds):") + 1:][:3]
    assert [line.split()[-1] for line in slowest] == ["tests.python.test_x::test_b", "tests.python.test_x::test_e",
                                                      "tests.python.test_x::test_a"]
    assert "within its budget of 60 minutes" in done.stdout and "OVER BUDGET" not in done.stdout


def test_summary_fails_a_run_past_its_budget_with_the_slowest_tests(tmp_path):
    (tmp_path / "legs.tsv").write_text("newest\tnewest torch\t3700\t0\n")
    _junit(tmp_path / "newest-pytest-1.xml", [("test_slow", 900.0, "passed")])
    done = _summary(tmp_path, 3700, 60)
    assert done.returncode == 1
    assert "OVER BUDGET" in done.stdout and "61 min 40 s" in done.stdout
    assert "test_slow" in done.stdout
    assert done.stdout.splitlines()[-1] == "customops: 1 passed, 0 failed, 0 skipped"
    assert _summary(tmp_path, 3700, 0).returncode == 0  # no budget
