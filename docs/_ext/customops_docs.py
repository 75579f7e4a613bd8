"""Sphinx directives that write tables from the loaded customops library at build time.

``customops-schemas``
    every overload of every ``torch.ops.customops`` operator (``.default``, ``.out``, ``.mamba``, ...): its schema
    (``torch.ops.customops.<op>.<overload>._schema``) and tags.
``customops-dispatch-keys``
    which dispatch keys have a kernel for each overload of each operator.
``customops-op-table <name>``
    a per-operator table of the user guide and design pages, from what the package's modules declare
    (``customops_tables.py`` says where each table's rows come from). Option ``:kept-why:`` (table ``compile``):
    why the ops that Inductor does not decompose stay whole.
``customops-op-api functions|modules``
    the API page's autodoc entry of every op's function, or of every op's module.

The first two read the dispatcher of this process, so the tables always match the library the site was built with
(its version and torch are stated under each table); nothing is copied by hand. ``conf.py`` has imported
customops (and so loaded the library) before this module is used.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

import customops_tables

# The keys each family's registration file registers (registration/<family>.cpp), and the one customops.func
# registers from Python for torch.func transforms.
DISPATCH_KEYS = ("CPU", "CUDA", "Meta", "Autograd", "AutocastCPU", "AutocastCUDA", "FuncTorchDynamicLayerFrontMode")
KEY_TITLES = {"FuncTorchDynamicLayerFrontMode": "torch.func"}


def customops_op_names() -> list[str]:
    """``customops::<op>`` names of every registered customops operator, sorted."""
    import customops

    names = [f"customops::{n}" for n in customops._library.registered_ops()]
    if not names:
        raise RuntimeError("docs: no customops operators are registered: the library did not load")
    return names


def _op(name: str):
    import torch

    return getattr(torch.ops.customops, name.split("::", 1)[1])


def _built_with() -> str:
    import torch

    import customops

    info = customops.build_info()
    cuda = "with CUDA kernels" if info.get("cuda") else "without CUDA kernels"
    return (f"Generated when this site was built, from the loaded library (customops {customops.__version__}, "
            f"built against torch {info.get('torch_version', torch.__version__)}, {cuda}).")


def _table(headers: list[str], rows: list[list[nodes.Node]], widths: list[int], classes: list[str]) -> nodes.table:
    table = nodes.table(classes=["colwidths-given", *classes])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for title in headers:
        row += nodes.entry("", nodes.paragraph(text=title))
    head += row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += cell if isinstance(cell, nodes.paragraph) else nodes.paragraph("", "", cell)
            row += entry
        body += row
    return table


class SchemasDirective(SphinxDirective):
    """A table of every customops operator's schema and tags."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        rows = []
        for name in customops_op_names():
            packet = _op(name)
            for overload in packet.overloads():
                op = getattr(packet, overload)
                qualified = f"torch.ops.customops.{name.split('::', 1)[1]}"
                if overload != "default":
                    qualified += f".{overload}"
                schema = str(op._schema)
                tags = ", ".join(sorted(str(t).split(".")[-1].removesuffix("_tag") for t in op.tags)) or "-"
                rows.append([nodes.literal(text=qualified), nodes.literal(text=schema), nodes.Text(tags)])
        return [_table(["operator", "schema", "tags"], rows, [22, 66, 12], ["customops-schemas"]),
                nodes.paragraph(text=_built_with())]


class DispatchKeysDirective(SphinxDirective):
    """A table of the dispatch keys that have a kernel for each customops operator."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        import torch

        rows = []
        for name in customops_op_names():
            for overload in _op(name).overloads():
                # The dispatcher names an overload "ns::op.overload", the default one "ns::op".
                qualified = name if overload == "default" else f"{name}.{overload}"
                cells: list[nodes.Node] = [nodes.literal(text=qualified)]
                for key in DISPATCH_KEYS:
                    has = torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
                    cells.append(nodes.Text("yes" if has else "-"))
                rows.append(cells)
        headers = ["operator", *(KEY_TITLES.get(k, k) for k in DISPATCH_KEYS)]
        return [_table(headers, rows, [30] + [10] * len(DISPATCH_KEYS), ["customops-dispatch-keys"]),
                nodes.paragraph(text=_built_with())]


class OpTableDirective(SphinxDirective):
    """A per-operator table (``customops_tables.table``). Its cells are MyST Markdown (code, roles such as
    {doc} and {func}), so the table is written as Markdown and parsed as part of the page: use it in .md pages."""

    has_content = False
    required_arguments = 1
    option_spec = {"kept-why": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        for path in customops_tables.source_files(self.arguments[0]):
            self.env.note_dependency(path)
        options = {"kept_why": self.options["kept-why"]} if "kept-why" in self.options else {}
        lines = customops_tables.table(self.arguments[0], **options).markdown()
        parent = nodes.Element()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, parent)
        return parent.children


class OpApiDirective(SphinxDirective):
    """The autodoc entries of every op's function (argument ``functions``) or module (``modules``), in op order
    (``customops_tables.api_objects``), so that the API page lists a new op without an edit."""

    has_content = False
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        directive = {"functions": "autofunction", "modules": "autoclass"}.get(self.arguments[0])
        if directive is None:
            raise self.error(f"customops-op-api: expected 'functions' or 'modules', got {self.arguments[0]!r}")
        for path in customops_tables.source_files("ops"):
            self.env.note_dependency(path)
        # reStructuredText inside the Markdown page, as the page's own autodoc entries are written.
        lines = ["```{eval-rst}", *(f".. {directive}:: {name}" for name in customops_tables.api_objects(
            self.arguments[0])), "```"]
        parent = nodes.Element()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset, parent)
        return parent.children


def setup(app: Sphinx) -> dict:
    app.add_directive("customops-schemas", SchemasDirective)
    app.add_directive("customops-dispatch-keys", DispatchKeysDirective)
    app.add_directive("customops-op-table", OpTableDirective)
    app.add_directive("customops-op-api", OpApiDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
