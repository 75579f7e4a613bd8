"""scripts/new_op.py NAME (--like OP | --inputs X,...): the skeleton of a new operator.

    scripts/new_op.py gelu_mul --inputs a,b            # a pointwise op of two tensors
    scripts/new_op.py gelu_mul --like silu_mul         # the same: silu_mul's inputs
    scripts/new_op.py softcap --inputs x --args "cap:float>0"   # with a scalar argument (customops._scalar_args)
    scripts/new_op.py moving_sum --like one_input          # from a template of its shape (template_op)
    scripts/new_op.py causal_conv1d --like trilinear_interpolation [--executorch]
    [--class-name GeluMul] [--dry-run]

Runs on a source checkout before its first build (customops/__init__.py loads no library for customops.dev), and
before any set-up through scripts/new_op.py, which puts the checkout's python/ on the path; where customops is
importable (the project's environment), `python -m customops.dev.new_op` is the same.

An operator's code lives in its family's files, one per concern (FAMILY_PLACES), and in a few lines of the
files every operator shares (SHARED_EDITS). A pointwise op (--inputs, or --like a pointwise op, whose inputs it
takes) is written from customops.dev.pointwise_op: everything that follows from its inputs, and a stub and a TODO
where its maths goes. An op with kernels of its own starts from the template of its shape (--like one_input,
--like two_inputs: customops.dev.template_op), working code with a TODO where one op differs from another, or is a
copy of OP's family under NAME, renaming OP's identifiers, with OP's maths
(the regions its files mark with ``scaffold:`` comments) replaced by stubs and TODOs; its ExecuTorch kernel (the
regions marked ``scaffold-if executorch``, its kernels/executorch and kernels/core files) only with --executorch.
Every TODO fails tests/python/test_registry.py until replaced, and the stubs fail the generic tests. The
walk-through is docs/design/adding_an_operator.md.

OP must be pointwise, or the only operator of its family with its maths marked (trilinear_interpolation's is);
the scaffold refuses others rather than hand over a copy that passes its tests on OP's maths.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .. import _scalar_args
from . import pointwise_op, template_op

# Where a family's code lives, one place per concern; `{family}` is the family's name (the file stem of its
# registration file). Each place is a file or a folder of files (kernels/cuda/<family>/). Python concerns are
# the packages of python/customops that hold a module per family (they discover their modules).
FAMILY_PLACES: Tuple[Tuple[str, str], ...] = (
    ("kernels/{family}.h", "maths (scalar formulas shared by CPU and CUDA), argument checks, kernel declarations; "
     "a pointwise family: one struct of formulas deriving from pw::Formula (kernels/core/pointwise.h)"),
    ("kernels/cpu/{family}.cpp", "CPU kernels (compiled once per instruction set), or a folder kernels/cpu/{family}/ "
     "(a pointwise family has none: CMake writes its instantiation of the shared kernels, "
     "cmake/CustomopsPointwise.cmake)"),
    ("kernels/cuda/{family}/", "CUDA kernels (a pointwise family has none, as on the CPU)"),
    ("kernels/core/{family}.h", "the maths that runs in more than one runtime, on raw pointers and without ATen: "
     "libtorch's CPU kernels and customops' ExecuTorch kernels call it (a family with an ExecuTorch kernel)"),
    ("kernels/executorch/{family}.cpp", "ExecuTorch kernels: the op's out variant (<op>.out) on ExecuTorch's "
     "tensors, calling kernels/core/{family}.h, where it beats the core-ATen decomposition"),
    ("kernels/common/{family}.cpp", "host code the backends share where it is too much for the header (the "
     "convolutions' plans); a small family's checks and plans are inline in kernels/{family}.h"),
    ("kernels/meta/{family}.cpp", "Meta kernels: output shapes, dtypes and strides (a pointwise family has none: "
     "the shared ones)"),
    ("registration/{family}.cpp", "kernels per dispatch key, autograd (the backward and double backward), autocast "
     "(a pointwise family has none: CMake writes its CUSTOMOPS_REGISTER_POINTWISE line)"),
    ("ops/include/customops/{family}.h", "C++ API: each op an inline function that calls it through the "
     "dispatcher, by a typed handle (customops::detail) that the autograd kernels share"),
    ("python/customops/functional/{family}.py", "the Python functions: each one's docstring is its API page, its "
     "@_overview its line in the docs' operator and memory-format tables"),
    ("python/customops/modules/{family}.py", "the nn.Modules, each docstring naming its function first (not for "
     "pointwise ops: made from their formulas' MODULE)"),
    ("python/customops/pointwise/{family}.py", "a pointwise op's formulas (value, first and second derivatives) "
     "and compiled-graph choice, once for the Python paths: the nn.Module, Inductor, litert-torch, ONNX, "
     "torch.func and sharding (each made from them: no file of the family in those packages), the tests' "
     "reference, the benchmark's baseline"),
    ("python/customops/func/{family}.py", "torch.func: vmap rules and forward-mode formulas (not pointwise)"),
    ("python/customops/sharding/{family}.py", "DTensor sharding rules (not pointwise)"),
    ("python/customops/onnx/{family}.py", "ONNX translation (not pointwise)"),
    ("python/customops/inductor/{family}.py", "Inductor decomposition (not pointwise; where it is faster, else no "
     "file)"),
    ("python/customops/litert/{family}.py", "litert-torch (PyTorch -> TF-Lite): a lowering of its own, or a "
     "decomposition where litert-torch cannot convert the Inductor one (no file: the Inductor decomposition)"),
    ("python/customops/executorch/{family}.py", "ExecuTorch: a core-ATen decomposition where litert's (or the "
     "Inductor one) is not one or its runtime refuses it, and KERNELS, the ops customops' ExecuTorch kernels run "
     "(no file: litert's decomposition)"),
    ("tests/python/op_db/{family}.py", "the OpInfo: reference, samples, errors, strategies, fuzz call, cost"),
    ("python/customops/benchmark/ops/{family}.py", "benchmark cases against PyTorch (eager, compiled) and the demo"),
)

# The places of FAMILY_PLACES that only a family with an ExecuTorch kernel has (--executorch).
EXECUTORCH_PLACES = ("kernels/core/{family}.h", "kernels/executorch/{family}.cpp",
                     "python/customops/executorch/{family}.py")

# The lines every operator adds to files all operators share.
SHARED_EDITS: Tuple[Tuple[str, str], ...] = (
    ("registration/schemas.cpp", "the schemas of the op and its backward op (one place for every schema)"),
)

_MARK = re.compile(r"^(?P<indent>\s*)(?P<comment>//|#) scaffold: (?P<what>[^|]*?)\s*\|\s*(?P<stub>.*?)\s*$")
_END = re.compile(r"^\s*(//|#) scaffold-end\s*$")
# Lines a copy keeps only with a flag (the ExecuTorch kernel's wiring: --executorch), up to a `scaffold-end` line.
_IF = re.compile(r"^\s*(//|#) scaffold-if (?P<flag>[a-z]+)\s*$")


def marker(op: str) -> str:
    """The one form of every place the scaffold leaves work for `op`: in comments, code, strings, docstrings, table
    cells, and in metadata values that must be chosen (where it is the value itself, a string in place of a bool or
    a number, so that no placeholder stays valid once a comment above it goes). A model's stubs (its `scaffold:`
    lines) carry its own name's, which the copy renames."""
    return f"TODO({op})"


# Where todos_left looks: the places of FAMILY_PLACES and SHARED_EDITS, the docs and README's operator table.
TODO_DIRS = ("kernels", "registration", "ops", "python/customops", "tests", "docs", "examples")
TODO_FILES = ("README.md",)
TODO_SUFFIXES = {".h", ".cpp", ".cu", ".cuh", ".py", ".md", ".txt"}
_MODEL_STUB = re.compile(r"^\s*(//|#) scaffold: ")


def todos_left(root: Path, op: str) -> List[str]:
    """`path:line` of each place under `root` that still holds `op`'s marker: the work the scaffold left that is not
    done. A model op's `scaffold:` lines are the stubs a copy of it gets, not work left in it."""
    mark = marker(op)
    paths = [path for d in TODO_DIRS for path in sorted((root / d).rglob("*"))
             if path.suffix in TODO_SUFFIXES and path.is_file() and "__pycache__" not in path.parts]
    paths += [root / f for f in TODO_FILES if (root / f).is_file()]
    return [f"{path.relative_to(root).as_posix()}:{i}" for path in paths
            for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if mark in line and not _MODEL_STUB.match(line)]


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


@dataclass
class Plan:
    root: Path
    like: Optional[str]  # None for a pointwise op written from its inputs
    name: str
    family: Optional[str]  # the like op's family (its registration file's stem)
    class_name: str
    like_class: Optional[str]
    writes: Dict[Path, str] = field(default_factory=dict)  # path -> new content (new files and shared edits)
    todos: List[str] = field(default_factory=list)
    template: Optional[str] = None  # the template an op with kernels of its own is written from (template_op)


def find_root(start: Optional[Path] = None) -> Path:
    here = (start or Path(__file__)).resolve()
    for parent in [here, *here.parents]:
        if (parent / "registration" / "schemas.cpp").is_file() and (parent / "python" / "customops").is_dir():
            return parent
    raise SystemExit("customops.dev.new_op works on a source checkout of customops (with registration/schemas.cpp); "
                     "run it from one, or pass --root")


# The line that makes kernels/<op>.h a pointwise op's: its struct of formulas, deriving from pw::Formula. The
# build finds the pointwise ops by the same line (cmake/CustomopsPointwise.cmake), whose regex this one repeats.
POINTWISE_STRUCT = re.compile(r"^struct ([A-Za-z0-9_]+) : pw::Formula {", re.M)


def pointwise_inputs(root: Path, op: str) -> Optional[Tuple[str, ...]]:
    """The inputs of `op` if it is a pointwise op (kernels/<op>.h defines a struct deriving from pw::Formula, as
    cmake/CustomopsPointwise.cmake finds them), else None."""
    maths = root / "kernels" / f"{op}.h"
    if not maths.is_file() or not POINTWISE_STRUCT.search(maths.read_text()):
        return None
    formulas = ast.parse((root / f"python/customops/pointwise/{op}.py").read_text())
    found = [ast.literal_eval(n.value) for n in formulas.body if isinstance(n, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "INPUTS" for t in n.targets)]
    if len(found) != 1:
        raise SystemExit(f"python/customops/pointwise/{op}.py: expected INPUTS = (names of the op's tensors)")
    return tuple(found[0])


def pointwise_args(root: Path, op: str) -> Tuple[str, ...]:
    """The scalar arguments' specs of pointwise `op` (its formulas' ARGS), none where it has none."""
    formulas = ast.parse((root / f"python/customops/pointwise/{op}.py").read_text())
    found = [ast.literal_eval(n.value) for n in formulas.body if isinstance(n, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "ARGS" for t in n.targets)]
    return tuple(found[0]) if found else ()


def family_of(root: Path, op: str) -> str:
    """The family of `op`: the registration file that registers its kernels."""
    pattern = re.compile(r'm\.impl\("' + re.escape(op) + r'"')
    if pointwise_inputs(root, op) is not None:
        return op
    owners = [p.stem for p in sorted((root / "registration").glob("*.cpp")) if pattern.search(p.read_text())]
    if not owners:
        raise SystemExit(f"--like {op}: no registration/<family>.cpp registers kernels of '{op}'")
    family = owners[0]
    ops = set(re.findall(r'm\.impl\("(\w+?)(?:_backward)?"', (root / "registration" / f"{family}.cpp").read_text()))
    if ops != {op}:
        raise SystemExit(f"--like {op}: its family '{family}' holds several operators ({', '.join(sorted(ops))}); "
                         "start from an operator that is alone in its family (trilinear_interpolation), or give a "
                         "pointwise op's --inputs")
    return family


def family_files(root: Path, family: str, executorch: bool = True) -> List[Path]:
    """Every file of `family` in the places of FAMILY_PLACES (folders expanded), relative to root; those of
    EXECUTORCH_PLACES only with `executorch`."""
    out = []
    for pattern, _ in FAMILY_PLACES:
        if pattern in EXECUTORCH_PLACES and not executorch:
            continue
        candidates = [pattern.format(family=family)]
        if pattern.startswith("kernels/cpu/"):
            candidates.append(f"kernels/cpu/{family}/")
        for rel in candidates:
            path = root / rel
            if rel.endswith("/") and path.is_dir():
                out += sorted(p.relative_to(root) for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
            elif path.is_file():
                out.append(path.relative_to(root))
    return out


def renamer(plan: Plan):
    pairs = [(plan.like, plan.name), (plan.like.upper(), plan.name.upper()), (camel(plan.like), camel(plan.name))]
    if plan.like_class != camel(plan.like):
        pairs.append((plan.like_class, plan.class_name))
    word = namespace = None
    if plan.family != plan.like:
        pairs.append((camel(plan.family), camel(plan.name)))  # the family's classes: TrilinearFunction
        # The family's C++ namespace (customops::trilinear) cannot take the op's name, which the op's function in
        # namespace customops has: it becomes NAME_impl.
        namespace = re.compile(r"(?<![A-Za-z0-9_])(?:(?<=namespace )" + re.escape(plan.family) + "|"
                               + re.escape(plan.family) + r"(?=::))(?![A-Za-z0-9_])")
        # The family's own name elsewhere: file names, helpers (_trilinear_ref), "the upsample family".
        word = re.compile(r"(?<![A-Za-z0-9])" + re.escape(plan.family) + r"(?![A-Za-z0-9])")

    def rename(text: str) -> str:
        if namespace:
            text = namespace.sub(f"{plan.name}_impl", text)
        for old, new in pairs:
            text = text.replace(old, new)
        return word.sub(plan.name, text) if word else text

    return rename


def conditional_regions(text: str, where: str, flags: Sequence[str]) -> str:
    """Keeps each `scaffold-if FLAG` region's lines (without its marks) where FLAG is in `flags`, else drops them."""
    lines, out, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
        m = _IF.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _END.match(lines[end]) and not _MARK.match(lines[end]):
            end += 1
        if end == len(lines) or not _END.match(lines[end]):
            raise SystemExit(f"{where}:{i + 1}: a 'scaffold-if' region without its 'scaffold-end' line")
        if m["flag"] in flags:
            out += lines[i + 1:end]
        i = end + 1
    return "".join(out)


def stub_regions(text: str, where: str, plan: Plan) -> str:
    """Replaces each `scaffold:` region (the like op's maths) by its stub and a TODO."""
    lines, out, i = text.splitlines(keepends=True), [], 0
    while i < len(lines):
        m = _MARK.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not _END.match(lines[end]):
            end += 1
        if end == len(lines):
            raise SystemExit(f"{where}:{i + 1}: a 'scaffold:' region without its 'scaffold-end' line")
        indent, comment = m["indent"], m["comment"]
        out.append(f"{indent}{comment} {marker(plan.name)}: {m['what']}\n")
        if m["stub"]:
            out.append(f"{indent}{m['stub']}\n")
        plan.todos.append(f"{where}:{len(out)}: {m['what']}")
        i = end + 1
    return "".join(out)


def _calls(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(node))


def module_class(root: Path, family: str, like: str) -> str:
    rel = f"python/customops/modules/{family}.py"
    tree = ast.parse((root / rel).read_text())
    found = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and _calls(n, like)]
    if len(found) != 1:
        raise SystemExit(f"{rel}: expected one module calling {like}, found {found}")
    return found[0]


def add_schemas(plan: Plan, executorch: bool, schemas: Optional[Sequence[str]] = None) -> None:
    """The new op's schemas after the others: `schemas` as they are (a pointwise op's), or the like op's renamed,
    with a TODO (and its out variant's only with `executorch`)."""
    path = plan.root / "registration/schemas.cpp"
    text = plan.writes.get(path) or path.read_text()
    lib = text.index("TORCH_LIBRARY(customops, m) {")
    close = text.index("\n}\n", lib)
    if schemas is not None:
        # An out variant mutates its argument: not one of the functional ops the pt2 tags describe.
        new = "".join(f'  m.def("{schema}"{"" if ".out(" in schema else ", pt2"});\n' for schema in schemas)
    else:
        suffixes = r"(?:_backward|\.out)?" if executorch else r"(?:_backward)?"
        statements = re.findall(r'^\s*m\.def\("' + re.escape(plan.like) + suffixes + r'\(.*?\);\n', text, re.M | re.S)
        if not statements:
            raise SystemExit(f"registration/schemas.cpp: no schema of {plan.like}")
        new = f"  // {marker(plan.name)}: the schemas' arguments.\n" + "".join(renamer(plan)(s) for s in statements)
        plan.todos.append(f"registration/schemas.cpp: the schemas of {plan.name} and {plan.name}_backward")
    plan.writes[path] = text[:close] + "\n\n" + new.rstrip("\n") + text[close:]


def plan_pointwise(root: Path, name: str, inputs: Sequence[str], class_name: Optional[str],
                   arg_specs: Sequence[str] = ()) -> Plan:
    """A pointwise op of `inputs` and the scalar arguments `arg_specs` (customops.dev.pointwise_op)."""
    if not inputs or not all(re.fullmatch(r"[a-z][a-z0-9_]*", x) for x in inputs) or len(set(inputs)) < len(inputs):
        raise SystemExit(f"--inputs: the op's tensors' names, distinct lower-case identifiers, got {list(inputs)}")
    args = [_scalar_args.parse(spec) for spec in arg_specs]
    names = [*inputs, *(a.name for a in args)]
    if len(set(names)) < len(names) or "args" in names:
        raise SystemExit("--args: names distinct from each other and from the inputs' (and not 'args', the "
                         "formulas' name for their values)")
    plan = Plan(root, None, name, None, class_name or camel(name), None)
    for rel, text in pointwise_op.files(name, plan.class_name, inputs, args).items():
        if (root / rel).exists():
            raise SystemExit(f"{rel} exists already")
        plan.writes[root / rel] = text
        for i, line in enumerate(text.splitlines(), 1):
            if f"{marker(name)}:" in line:  # what follows, up to the end of its string if it is in one
                what = line.split(f"{marker(name)}:", 1)[1].split('"')[0].strip()
                plan.todos.append(f"{rel}:{i}: {what}")
    add_schemas(plan, False, pointwise_op.schemas(name, inputs, args))
    return plan


def _todo_what(line: str, name: str) -> str:
    """What a line holding `name`'s marker leaves to do: what follows the marker, up to the end of its string."""
    return line.split(marker(name), 1)[1].lstrip(":").split('"')[0].strip() or line.strip()


def plan_template(root: Path, name: str, template: str, class_name: Optional[str]) -> Plan:
    """A family of its own written from `template` (customops.dev.template_op): its files, and the template's
    lines of registration/schemas.cpp after the others."""
    plan = Plan(root, None, name, name, class_name or camel(name), None, template=template)
    for rel, text in template_op.files(template, name, plan.class_name).items():
        if rel == template_op.SCHEMAS:
            path = root / rel
            schemas = plan.writes.get(path) or path.read_text()
            close = schemas.index("\n}\n", schemas.index("TORCH_LIBRARY(customops, m) {"))
            plan.writes[path] = schemas[:close] + "\n\n" + text.rstrip("\n") + schemas[close:]
        elif (root / rel).exists():
            raise SystemExit(f"{rel} exists already")
        else:
            plan.writes[root / rel] = text
    plan.todos = [f"{path.relative_to(root).as_posix()}:{i}: {_todo_what(line, name)}"
                  for path, text in plan.writes.items() for i, line in enumerate(text.splitlines(), 1)
                  if marker(name) in line]
    return plan


def plan_op(root: Path, name: str, like: Optional[str], class_name: Optional[str] = None, *,
            inputs: Optional[Sequence[str]] = None, executorch: bool = False, unmarked_maths: bool = False,
            args: Optional[Sequence[str]] = None) -> Plan:
    """What the scaffold writes: a pointwise op of `inputs` (or of pointwise `like`'s inputs), or a copy of `like`'s
    family, its ExecuTorch kernel with `executorch`. `unmarked_maths` copies a family whose files mark no maths (the
    copy then computes the model op's maths under the new name, and passes its tests): for checking the renaming
    alone."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name.endswith("_backward"):
        raise SystemExit(f"NAME must be a lower-case identifier not ending in _backward, got {name!r}")
    schemas = (root / "registration/schemas.cpp").read_text()
    own = (f"registration/{name}.cpp", f"kernels/{name}.h")
    if re.search(r'm\.def\("' + re.escape(name) + r'\(', schemas) or any((root / f).exists() for f in own):
        raise SystemExit(f"'{name}' exists already")
    if like is None and inputs is None:
        raise SystemExit("give --like OP (the operator to start from) or --inputs X,... (a pointwise op's tensors)")
    if like in template_op.names():
        if inputs is not None or executorch:
            raise SystemExit(f"--like {like}: a template takes no --inputs or --executorch (its tensors are its own; "
                             "an ExecuTorch kernel: --like trilinear_interpolation --executorch)")
        return plan_template(root, name, like, class_name)
    like_inputs = pointwise_inputs(root, like) if like is not None else None
    if inputs is not None or like_inputs is not None:
        if executorch:
            raise SystemExit("--executorch: a pointwise op runs in ExecuTorch by its decomposition")
        return plan_pointwise(root, name, inputs or like_inputs, class_name,
                              args if args is not None else pointwise_args(root, like) if inputs is None else ())
    if args:
        raise SystemExit("--args: scalar arguments of a pointwise op (--inputs, or --like a pointwise op); an op "
                         "with kernels of its own declares its arguments in its schema")
    family = family_of(root, like)
    plan = Plan(root, like, name, family, class_name or camel(name), module_class(root, family, like))
    rename = renamer(plan)
    files = family_files(root, family, executorch)
    reference = root / f"tests/python/op_db/{family}.py"
    if not unmarked_maths and not any(_MARK.match(line) for line in reference.read_text().splitlines()):
        raise SystemExit(f"--like {like}: its files mark no maths with 'scaffold:' regions yet, so the new op would "
                         f"compute {like}'s maths and pass its tests; start from trilinear_interpolation, give a "
                         f"pointwise op's --inputs, or mark {like}'s maths first (docs/design/adding_an_operator.md)")
    for rel in files:
        new_rel = Path(rename(str(rel)))
        target = root / new_rel
        if target.exists():
            raise SystemExit(f"{new_rel} exists already")
        text = conditional_regions((root / rel).read_text(), str(new_rel), ["executorch"] if executorch else [])
        plan.writes[target] = rename(stub_regions(text, str(new_rel), plan))
    add_schemas(plan, executorch)
    return plan


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/new_op.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="the new operator's name (lower case, e.g. silu_mul)")
    p.add_argument("--like", help="what to start from: a pointwise op (its inputs); the template of an op with "
                   "kernels of its own, by its shape (" + "; ".join(f"{t}: {template_op.about(t)}"
                                                               for t in template_op.names())
                   + "); or trilinear_interpolation, copied")
    p.add_argument("--inputs", type=lambda v: tuple(v.split(",")),
                   help="a pointwise op's tensors, comma-separated (e.g. a,b)")
    p.add_argument("--args", type=_scalar_args.split, help="a pointwise op's scalar arguments, after its tensors, "
                   "comma-separated: name:float|int|bool|{a,b}[>|>=|<|<=bound...][=default] (e.g. \"cap:float>0\", "
                   "\"alpha:float=1.0\", \"n:int>=1<=8=2\", \"mode:{none,tanh}=none\")")
    p.add_argument("--executorch", action="store_true",
                   help="with the model's ExecuTorch kernel (kernels/executorch, kernels/core): for an op whose "
                   "kernel beats its decomposition in ExecuTorch")
    p.add_argument("--class-name", help="the nn.Module's name (default: the name in CamelCase)")
    p.add_argument("--root", type=Path, help="the source checkout (default: the one this package is in)")
    p.add_argument("--dry-run", action="store_true", help="list what would be written, write nothing")
    args = p.parse_args(argv)
    root = args.root.resolve() if args.root else find_root()
    plan = plan_op(root, args.name, args.like, args.class_name, inputs=args.inputs, executorch=args.executorch,
                   args=args.args)
    for path, text in plan.writes.items():
        rel = path.relative_to(root)
        verb = "edit" if path.exists() else "new "
        print(f"{verb} {rel}")
        if not args.dry_run:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    print(f"\n{len(plan.todos)} TODOs (the stubs the tests reject until the maths is written):")
    for todo in plan.todos:
        print(f"  {todo}")
    if not args.dry_run:
        print("\nNext: build (scripts/build.sh), then run every test that covers the new op: "
              f"python -m pytest tests/python --op {args.name}; docs/design/adding_an_operator.md walks the rest.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
