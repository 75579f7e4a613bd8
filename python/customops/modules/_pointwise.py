"""A pointwise family's nn.Module, made from its formulas (customops.pointwise) and its function
(customops.functional): ``MODULE`` there names the class, and may add a paragraph to its docstring, whose first
line is the formula."""

from __future__ import annotations

from types import ModuleType

from torch import Tensor, nn

from .. import functional as F
from .._families import function_from_source, short_name, synthesized
from ..pointwise import args_of, as_text, text_names


def family(formulas: ModuleType) -> ModuleType:
    name, inputs, args = short_name(formulas), formulas.INPUTS, args_of(formulas)
    class_name, *note = getattr(formulas, "MODULE", ("".join(p.capitalize() for p in name.split("_")),))
    tensors = ", ".join(inputs)
    shape = f"{tensors}: any shape, the same. Output: that shape." if len(inputs) > 1 else \
        f"{tensors}: any shape. Output: the same shape."
    # The op's scalar arguments are the module's constructor's (attributes of the same names).
    given = ", ".join(f"{a.name}={a.valid_values()[0]!r}" for a in args if not a.has_default)
    try:
        formula = as_text(formulas.forward, *text_names(formulas))
    except NotImplementedError as todo:  # the scaffold's stub: the package still imports, the docs show the TODO
        formula = str(todo)
    paragraphs = [f"Applies :func:`customops.{name}` elementwise: ``{formula}``.",
                  *note, *([f"Args:\n        " + "\n        ".join(
                      f"{a.name}: the op's ``{a.name}``" + (f" ({a.range_text()})" if a.range_text() else "")
                      for a in args)] if args else []),
                  f"Shape:\n        {shape}",
                  f"Example::\n\n        >>> m = customops.{class_name}({given})\n        >>> y = m("
                  + ", ".join("torch.randn(2, 8)" for _ in inputs) + ")"]
    doc = "\n\n    ".join(paragraphs)
    init = ""
    if args:
        shown = ", ".join(f"{a.name}={{self.{a.name}!r}}" for a in args)
        init = (f"    def __init__(self, {', '.join(a.python() for a in args)}) -> None:\n"
                "        super().__init__()\n"
                + "".join(f"        self.{a.name} = {a.name}\n" for a in args) + "\n"
                "    def extra_repr(self) -> str:\n"
                f'        return f"{shown}"\n\n')
    call = ", ".join([*inputs, *(f"self.{a.name}" for a in args)])
    source = (f"class {class_name}(nn.Module):\n"
              f'    r"""{doc}\n    """\n\n'
              f"{init}"
              f"    def forward(self, {', '.join(f'{x}: Tensor' for x in inputs)}) -> Tensor:\n"
              f"        return F.{name}({call})\n")
    # The class's globals are its module's namespace, as a written module's are: torch.compile guards on them
    # through the module (sys.modules), by name.
    module = synthesized(__package__, formulas, __all__=[class_name], nn=nn, Tensor=Tensor, F=F)
    function_from_source(source, class_name, module.__dict__, f"the module of {name}")
    return module
