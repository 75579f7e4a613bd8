"""Sphinx configuration of the customops documentation site.

Build it with ``scripts/docs.sh`` (``python -m sphinx -W --keep-going -b html docs <out>``). The site documents
the customops package that this interpreter imports: the API pages are generated from its docstrings
(autodoc + napoleon), the schema and dispatch-key tables from the loaded library (``_ext/customops_docs.py``) and
the per-operator tables from what the package's modules declare (``_ext/customops_tables.py``), so the library
must be built first (``scripts/install.sh`` or ``scripts/build.sh``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))


def _import_customops():
    """Imports customops, or stops the build with the reason: the API pages and schema tables cannot be
    written without the built library, and a site without them must not pass for a good one."""
    try:
        import customops
    except ModuleNotFoundError as e:
        if e.name != "customops":
            raise
        # Not installed in this interpreter: the source tree's package (scripts/build.sh stages the library
        # into python/customops/lib).
        sys.path.insert(0, str(ROOT / "python"))
        import customops
    return customops


try:
    customops = _import_customops()
except Exception as e:  # noqa: BLE001 (any failure stops the build, with its cause)
    raise RuntimeError(
        f"docs: `import customops` failed ({type(e).__name__}: {e}). The documentation is generated from the "
        "built library: build it first (scripts/install.sh, or scripts/build.sh and PYTHONPATH=python), with "
        f"the same torch as this interpreter ({sys.executable})."
    ) from e

project = "customops"
author = "the customops authors"
copyright = "the customops authors"
release = customops.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.graphviz",
    "customops_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
# The benchmark tables are generated files, shown through the performance pages' include directives.
exclude_patterns = ["_build", "_ext", "benchmarks/*.md", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_type_aliases = {"BroadcastingList2": "BroadcastingList2"}
autodoc_default_options = {"undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_custom_sections = ["Shape"]

graphviz_output_format = "svg"

html_theme = "furo"
html_title = f"customops {release}"
html_static_path = ["_static"]
html_css_files = ["customops.css"]
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
