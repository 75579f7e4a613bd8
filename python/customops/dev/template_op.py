"""The templates of operators with kernels of their own, picked by shape (customops/dev/templates/<shape>/).

A template is a family's files as they are in a checkout, under the names the tokens below stand for, with a
`TODO(__op__)` wherever one operator differs from another (its maths, its result's shape, its arguments' checks,
its translations, rules and tests) and working code elsewhere: the checks, plans and allocation, the kernels'
loops over the result's elements on CPU and CUDA, the Meta kernels, the registration for every dispatch key, the
autograd of the op and of its backward op, the C++ API and the Python concerns' wiring. A new op from a template
builds, and its stubs fail its tests (an element's maths is NaN, a Python stub raises NotImplementedError) until
its TODOs are done. The file `registration/schemas.cpp` of a template holds the lines the op adds to the checkout's
(new_op.SHARED_EDITS); TEMPLATE.md says what the template is for and is not copied.

Tokens, in paths and in text: `__op__` the op's name (its backward op `__op___backward`, its family's C++
namespace `__op___impl`), `__Op__` its class name (the nn.Module, the autograd Functions), `__OP__` its name in
upper case (the OpInfo's variable). They are identifiers, so that each template file is valid C++ or Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

TEMPLATES = Path(__file__).resolve().with_name("templates")
ABOUT = "TEMPLATE.md"  # what the template is for; not copied
SCHEMAS = "registration/schemas.cpp"  # the lines the op adds to the checkout's schemas


def names() -> List[str]:
    """The templates' names (their folders), sorted."""
    return sorted(p.name for p in TEMPLATES.iterdir() if p.is_dir() and (p / ABOUT).is_file())


def about(template: str) -> str:
    """The first paragraph of the template's TEMPLATE.md after its title, on one line: what it is for."""
    paragraphs = (TEMPLATES / template / ABOUT).read_text().split("\n\n")
    return " ".join(next(p for p in paragraphs if not p.startswith("#")).split())


def _substitute(text: str, name: str, cls: str) -> str:
    return text.replace("__op__", name).replace("__Op__", cls).replace("__OP__", name.upper())


def sources(template: str) -> Dict[str, str]:
    """Relative path -> text of the template's files as stored (tokens unreplaced), TEMPLATE.md left out."""
    root = TEMPLATES / template
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ABOUT and "__pycache__" not in p.parts}


def files(template: str, name: str, cls: str) -> Dict[str, str]:
    """Relative path -> text of each file the op owns, and under SCHEMAS the lines it adds to the schemas."""
    return {_substitute(rel, name, cls): _substitute(text, name, cls) for rel, text in sources(template).items()}
