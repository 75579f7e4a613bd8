"""The per-operator tables of the documentation, generated from what the customops package declares.

Each table has a row or more per operator, and those rows live with the code they describe, so that a new
operator brings its rows with its own files instead of a dozen hand edits of the docs:

``sharding``, ``func``, ``onnx``
    the ``DOC_ROWS`` of each family module of ``customops.<concern>`` (found as the package finds them, with
    ``customops._families.family_modules``).
``compile``
    the ``DOC_ROWS`` of each family module of ``customops.inductor`` (the ops it decomposes), and one generated
    row of every forward op that no such module decomposes: those stay whole in compiled graphs. An op is kept by
    having no module there, so no family file can hold why; the page gives that row's reason (``kept_why``).
``ops``
    one row per registered forward op: its function ``customops.<op>``, the class of ``customops.modules`` whose
    docstring names that function first (``:func:`customops.<op>```), and the ``overview`` that
    ``customops/functional/<family>.py`` attaches to the function (``@_overview``).
``layouts``
    one row per registered forward op: the ``layouts`` that ``@_overview`` attaches to its function (NCHW,
    channels_last, the result's memory format).

A row is a tuple of cells in MyST Markdown; its first cell names the op(s) it covers in backticks. A row does not
know the page that shows it, so its links to pages are absolute ({doc}`/design/conv2d`). Rows are ordered
as ``customops.functional`` exports the ops (a family's rows stay together, in the order the family module gives
them), so every table lists the ops in the same order. Nothing here names a family or an op.

Plain Python (no Sphinx), so that tests can check the tables without building the site.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

Row = tuple[str, ...]


@dataclass(frozen=True)
class Table:
    headers: Row
    rows: list[Row]

    def markdown(self) -> list[str]:
        """The table as Markdown lines (a GitHub-style pipe table, which MyST parses)."""
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(_cell(c) for c in cells) + " |"

        return [line(self.headers), "|" + "---|" * len(self.headers), *(line(r) for r in self.rows)]


def _cell(text: str) -> str:
    # A row's cells are written as long Python strings; a newline or a bare pipe would end the cell early.
    return " ".join(text.split()).replace("|", r"\|")


def op_names() -> list[str]:
    """Every registered ``customops`` operator (forward and backward), by name without the namespace."""
    import customops

    names = customops._library.registered_ops()
    if not names:
        raise RuntimeError("docs: no customops operators are registered: the library did not load")
    return names


def _op_order() -> Callable[[str], tuple]:
    """Sort key of op names: the order in which customops.functional exports their functions (its family modules
    in name order, each in definition order); ops without a function last, by name."""
    from customops import functional

    defined = {name: i for i, name in enumerate(vars(functional))}
    return lambda op: (defined.get(op, len(defined)), op)


def forward_ops() -> list[str]:
    """The registered forward ops (every one but the ``_backward`` ops), in the order of :func:`_op_order`."""
    return sorted((n for n in op_names() if not n.endswith("_backward")), key=_op_order())


def ops_named(cell: str) -> list[str]:
    """The registered ops a cell names in backticks: ```im2col```, or a role's target such as
    ``{func}`~customops.im2col```."""
    registered = set(op_names())
    found = re.findall(r"`~?(?:customops\.)?([A-Za-z_][A-Za-z0-9_]*)`", cell)
    return list(dict.fromkeys(name for name in found if name in registered))


def _families(package: str) -> list[ModuleType]:
    from customops._families import family_modules

    try:
        concern = importlib.import_module(package)
        return family_modules(concern.__name__, concern.__path__)
    except ImportError as e:
        raise RuntimeError(f"docs: the tables of {package} are read from its family modules, which did not import "
                           f"({type(e).__name__}: {e}); the docs need what the package needs "
                           "(for customops.onnx: pip install 'customops[onnx]')") from e


def _family_rows(package: str, width: int) -> list[Row]:
    """The DOC_ROWS of every family module of ``package``, a family's rows together, the families in op order."""
    order = _op_order()
    families = []
    for family in _families(package):
        rows = [tuple(row) for row in getattr(family, "DOC_ROWS", ())]
        for row in rows:
            if len(row) != width:
                raise ValueError(f"docs: {family.__name__}.DOC_ROWS: a row of {len(row)} cells, the table has "
                                 f"{width} columns: {row!r}")
        named = [op for row in rows for op in ops_named(row[0])]
        families.append((min(map(order, named), default=(float("inf"), "")), family.__name__, rows))
    return [row for *_, rows in sorted(families) for row in rows]


def _decomposed_ops(package: str) -> set[str]:
    """Every op that a family module of ``package`` (customops.inductor) decomposes."""
    return {name for family in _families(package)
            for name in (family.OP, *getattr(family, "DECOMPOSITIONS", {}))}


def _compile_rows(package: str, width: int, kept_why: str = "") -> list[Row]:
    rows = _family_rows(package, width)
    decomposed = _decomposed_ops(package)
    kept = [op for op in forward_ops() if op not in decomposed]
    if kept:
        rows.append((", ".join(f"`{op}`" for op in kept), "kept", "—", kept_why))
    return rows


def _module_classes(module_name: str) -> dict[str, str]:
    """op name -> the name of the class of ``module_name`` (customops.modules) that wraps it, found by its docstring,
    which names the function it applies first (``:func:`customops.<op>```)."""
    import torch

    import customops

    modules = importlib.import_module(module_name)
    found: dict[str, str] = {}
    for name, cls in vars(modules).items():
        if name.startswith("_") or not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            continue
        if not cls.__module__.startswith(modules.__name__ + ".") or getattr(customops, name, None) is not cls:
            continue  # imported names, and classes customops does not export
        match = re.search(r":func:`~?customops\.(\w+)`", cls.__doc__ or "")
        if match:
            if match.group(1) in found:
                raise ValueError(f"docs: customops.{found[match.group(1)]} and customops.{name} both wrap "
                                 f"customops.{match.group(1)} (by their docstrings)")
            found[match.group(1)] = name
    return found


def _declared(op: str, attribute: str, what: str, how: str):
    """What ``@_overview`` (customops/functional/<family>.py) attached to the function ``customops.<op>`` as
    ``attribute``; ``what`` and ``how`` say, in the error where it is missing, what it is and how to give it."""
    import customops

    function = getattr(customops, op, None)
    if function is None:
        raise ValueError(f"docs: registered op {op} has no function customops.{op} (customops/functional/<family>.py, "
                         "named in that module's __all__)")
    value = getattr(function, attribute, None)
    if not value:
        raise ValueError(f"docs: customops.{op} has no {attribute}, {what} "
                         f"(customops/functional/<family>.py: {how})")
    return value


def _ops_rows(module_name: str, width: int) -> list[Row]:
    module_of = _module_classes(module_name)
    rows = []
    for op in forward_ops():
        overview = _declared(op, "overview", "the operator table's text for it", "@_overview(...) on the function")
        what = f"{{func}}`~customops.{op}`"
        if op in module_of:
            what += f", {{class}}`~customops.{module_of[op]}`"
        rows.append((what, overview))
    assert all(len(r) == width for r in rows)
    return rows


def _layout_rows(module_name: str, width: int) -> list[Row]:
    """One row per registered forward op: what ``customops.<op>`` does with NCHW and channels_last inputs, and its
    result's memory format (the ``layouts`` that customops/functional/<family>.py attaches with ``@_overview``)."""
    rows = []
    for op in forward_ops():
        layouts = _declared(op, "layouts", "the memory-format table's cells for it",
                            "@_overview(..., layouts=(nchw, channels_last, result))")
        rows.append((f"`{op}`", *layouts))
    assert all(len(r) == width for r in rows)
    return rows


def api_objects(kind: str) -> list[str]:
    """The dotted names the API page documents for every registered forward op, in op order: ``functions``
    (``customops.<op>``) or ``modules`` (the class of customops.modules that wraps each, where there is one)."""
    if kind == "functions":
        import customops.functional

        # Then the functions of an op's family beside the op's own (causal_conv1d's decoding step, an overload).
        names = [f"customops.{op}" for op in forward_ops()]
        return names + [f"customops.{n}" for n in customops.functional.__all__ if f"customops.{n}" not in names]
    if kind == "modules":
        module_of = _module_classes("customops.modules")
        return [f"customops.{module_of[op]}" for op in forward_ops() if op in module_of]
    raise ValueError(f"docs: expected 'functions' or 'modules', got {kind!r}")


# Each table's header; the rows follow from it (their width) and from its source.
HEADERS: dict[str, Row] = {
    "sharding": ("op", "computed locally (one mesh dimension)"),
    "func": ("op", "vmap rule", "forward-mode (jvp, jacfwd) formula"),
    "onnx": ("customops op", "ONNX"),
    "compile": ("op", "in compiled graphs", "compiled ratio, decomposed / kept (H100, 2026-11-26)", "why"),
    "ops": ("op: function, module", "what"),
    "layouts": ("op", "NCHW", "channels_last", "result's memory format"),
}

# Where each table's rows come from: the function that reads them, and the package (of family modules) or module
# it reads.
_SOURCES: dict[str, tuple[Callable[..., list[Row]], str]] = {
    "sharding": (_family_rows, "customops.sharding"),
    "func": (_family_rows, "customops.func"),
    "onnx": (_family_rows, "customops.onnx"),
    "compile": (_compile_rows, "customops.inductor"),
    "ops": (_ops_rows, "customops.modules"),
    "layouts": (_layout_rows, "customops.functional"),
}


def source_files(name: str) -> list[str]:
    """The Python files table ``name`` is read from: a page that shows it is out of date when one changes."""
    files = []
    # Every table's order, and the ops table's text, come from customops.functional too.
    for module_name in (_SOURCES[name][1], "customops.functional"):
        module = importlib.import_module(module_name)
        if hasattr(module, "__path__"):
            files += sorted(str(f) for d in module.__path__ for f in Path(d).glob("*.py"))
        else:
            files.append(module.__file__)
    return list(dict.fromkeys(files))


def table(name: str, **options: str) -> Table:
    """The table ``name`` (one of :data:`HEADERS`); ``options`` go to its rows' source (``kept_why`` for
    ``compile``)."""
    if name not in HEADERS:
        raise ValueError(f"docs: no table {name!r}; expected one of {', '.join(HEADERS)}")
    headers = HEADERS[name]
    read, source = _SOURCES[name]
    return Table(headers, read(source, len(headers), **options))


# --- the README's copy of the operator table (GitHub renders Markdown, not MyST's roles) --------------------------

README_BEGIN = ("<!-- the operator table: python docs/_ext/customops_tables.py README.md writes it, from the ops "
                "table -->")
README_END = "<!-- end of the operator table -->"


def _github(cell: str) -> str:
    """A cell's MyST roles as plain Markdown: {func}`~customops.x` as `x`, {doc}`/design/x` as a link to its file."""
    cell = re.sub(r"\{(?:func|class)\}`~?(?:customops\.)?([^`]+)`", r"`\1`", cell)
    cell = re.sub(r"\{doc\}`([^`<]+?) <(/[^>]+)>`", r"[\1](docs\2.md)", cell)
    return re.sub(r"\{doc\}`(/[^`]+)`", lambda m: f"[{m[1].rsplit('/', 1)[1]}](docs{m[1]}.md)", cell)


def readme_table() -> list[str]:
    """The README's operator table: the docs' ops table in plain Markdown, between README_BEGIN and README_END."""
    ops = table("ops")
    return [README_BEGIN, *Table(ops.headers, [tuple(_github(c) for c in row) for row in ops.rows]).markdown(),
            README_END]


def with_readme_table(text: str) -> str:
    """`text` (README.md) with its operator table replaced by :func:`readme_table`."""
    begin, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    return text[:begin] + "\n".join(readme_table()) + text[end:]


if __name__ == "__main__":
    import sys

    for path in sys.argv[1:]:
        readme = Path(path)
        readme.write_text(with_readme_table(readme.read_text()))
