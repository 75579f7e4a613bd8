"""A pointwise family's nn.Module, made from its formulas (customops.pointwise) and its function
(customops.functional): ``MODULE`` there names the class, and may add a paragraph to its docstring, whose first
line is the formula."""

from __future__ import annotations

from types import ModuleType

from torch import Tensor, nn

from .. import functional as F
from .._families import function_from_source, short_name, synthesized
from ..pointwise import as_text


def family(formulas: ModuleType) -> ModuleType:
    name, inputs = short_name(formulas), formulas.INPUTS
    class_name, *note = getattr(formulas, "MODULE", ("".join(p.capitalize() for p in name.split("_")),))
    args = ", ".join(inputs)
    shape = f"{args}: any shape, the same. Output: that shape." if len(inputs) > 1 else \
        f"{args}: any shape. Output: the same shape."
    paragraphs = [f"Applies :func:`customops.{name}` elementwise: ``{as_text(formulas.forward, *inputs)}``.",
                  *note, f"Shape:\n        {shape}",
                  f"Example::\n\n        >>> m = customops.{class_name}()\n        >>> y = m("
                  + ", ".join("torch.randn(2, 8)" for _ in inputs) + ")"]
    doc = "\n\n    ".join(paragraphs)
    source = (f"class {class_name}(nn.Module):\n"
              f'    r"""{doc}\n    """\n\n'
              f"    def forward(self, {', '.join(f'{x}: Tensor' for x in inputs)}) -> Tensor:\n"
              f"        return F.{name}({args})\n")
    # The class's globals are its module's namespace, as a written module's are: torch.compile guards on them
    # through the module (sys.modules), by name.
    module = synthesized(__package__, formulas, __all__=[class_name], nn=nn, Tensor=Tensor, F=F)
    function_from_source(source, class_name, module.__dict__, f"the module of {name}")
    return module
