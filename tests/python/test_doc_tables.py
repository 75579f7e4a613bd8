"""Every registered forward op has its rows in each per-operator table of the docs (sharding, torch.func, ONNX,
compile, the operator list, memory formats), and README.md's copy of the operator list. The rows live with the code
they describe (the ``DOC_ROWS`` of the family modules, the functions' overviews) and docs/_ext/customops_tables.py
puts them together when the site is built; these tests read the tables the same way, without building the site, so
a new op without its rows fails here first."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import customops

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import customops_tables  # noqa: E402

pytestmark = [pytest.mark.every_op, pytest.mark.torch_independent]  # each test checks every op's rows

# Where each table's rows are declared, for the failure messages.
SOURCES = {
    "sharding": "DOC_ROWS in python/customops/sharding/<family>.py",
    "func": "DOC_ROWS in python/customops/func/<family>.py",
    "onnx": "DOC_ROWS in python/customops/onnx/<family>.py",
    "compile": "DOC_ROWS in python/customops/inductor/<family>.py, or no module there (the op is then kept whole)",
    "ops": "customops.<op> with an @_overview in python/customops/functional/<family>.py",
    "layouts": "customops.<op>'s @_overview(..., layouts=...) in python/customops/functional/<family>.py",
}


def registered() -> set[str]:
    return set(customops._library.registered_ops())


def forward_ops() -> list[str]:
    return sorted(n for n in registered() if not n.endswith("_backward"))


def _needs(name: str) -> None:
    # These concerns' family modules import what they translate with; without it they cannot be read.
    if name == "onnx":
        pytest.importorskip("onnxscript")
    if name == "sharding" and not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available: customops.sharding has no family modules")


def test_every_table_has_a_source():
    assert set(SOURCES) == set(customops_tables.HEADERS)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_forward_op_has_a_row(name):
    _needs(name)
    table = customops_tables.table(name)
    covered = {op for row in table.rows for op in customops_tables.ops_named(row[0])}
    missing = [op for op in forward_ops() if op not in covered]
    assert forward_ops()
    assert not missing, (f"no row in the {name} table of the docs for {', '.join(missing)}: "
                         f"add it to {SOURCES[name]}")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_rows_name_registered_ops(name):
    """A misspelt op in a row's first cell would leave the op without a row and the row without an op."""
    _needs(name)
    known = registered()
    for row in customops_tables.table(name).rows:
        for word in re.findall(r"`~?(?:customops\.)?([a-z][a-z0-9_]*)`", row[0]):
            assert word in known, f"{name} table: row {row[0]!r} names `{word}`, which is not a registered op"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_table_is_on_a_page(name):
    pages = [p for p in (ROOT / "docs").rglob("*.md")
             if re.search(r"^```\{customops-op-table\} " + re.escape(name) + r"\s*$", p.read_text(), re.M)]
    assert pages, f"no docs page shows the {name} table (```{{customops-op-table}} {name}```)"


def test_the_api_page_documents_every_op_function_and_module():
    functions = customops_tables.api_objects("functions")
    ops = [f"customops.{op}" for op in customops_tables.forward_ops()]
    # Each op's function, in op order, then the other functions of the families (causal_conv1d_update).
    assert functions[:len(ops)] == ops
    assert sorted(functions) == sorted({f"customops.{n}" for n in customops.functional.__all__} | set(ops))
    modules = customops_tables.api_objects("modules")
    assert len(modules) == len(set(modules)) and modules, modules
    page = (ROOT / "docs" / "guide" / "api.md").read_text()
    for kind in ("functions", "modules"):
        assert re.search(r"^```\{customops-op-api\} " + kind + r"\s*$", page, re.M), kind


def test_the_readme_operator_table_is_the_ops_table():
    """README.md shows the docs' ops table (GitHub renders it); a new op's row comes from its own files."""
    readme = (ROOT / "README.md").read_text()
    assert customops_tables.with_readme_table(readme) == readme, \
        "README.md's operator table is out of date: python docs/_ext/customops_tables.py README.md rewrites it"
    assert all(f"| `{op}`, " in readme or f"| `{op}` |" in readme for op in forward_ops())
