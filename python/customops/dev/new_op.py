"""python -m customops.dev.new_op NAME --like OP: the skeleton of a new operator, from an existing one.

    python -m customops.dev.new_op silu_mul --like quick_gelu [--class-name SiluMul] [--dry-run]

An operator's code lives in its family's files, one per concern (FAMILY_PLACES), and in a few lines of the
files every operator shares (SHARED_EDITS). The scaffold copies the files of OP's family under NAME, renaming
OP's identifiers, and adds NAME's lines to the shared files after OP's. Where the copied code is OP's maths
(the regions OP's files mark with ``scaffold:`` comments), it writes a stub and a TODO instead: the new op
builds and every generic test runs over it at once, and the tests fail on the stubs until the maths is written.
The walk-through is docs/design/adding_an_operator.md.

OP must be the only operator of its family, and its files must mark its maths (quick_gelu's and
trilinear_interpolation's do); the scaffold refuses others rather than hand over a copy that passes its tests on
OP's maths.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# Where a family's code lives, one place per concern; `{family}` is the family's name (the file stem of its
# registration file). Each place is a file or a folder of files (kernels/cuda/<family>/). Python concerns are
# the packages of python/customops that hold a module per family (they discover their modules).
FAMILY_PLACES: Tuple[Tuple[str, str], ...] = (
    ("kernels/{family}.h", "maths (scalar formulas shared by CPU and CUDA), argument checks, kernel declarations; "
     "a pointwise family: one struct of formulas (kernels/common/pointwise.h)"),
    ("kernels/cpu/{family}.cpp", "CPU kernels (compiled once per instruction set), or a folder kernels/cpu/{family}/; "
     "a pointwise family: one line, the shared kernels' instantiation"),
    ("kernels/cuda/{family}.cu", "CUDA kernels of a pointwise family: one line, as the CPU's"),
    ("kernels/cuda/{family}/", "CUDA kernels of other families"),
    ("kernels/core/{family}.h", "the maths that runs in more than one runtime, on raw pointers and without ATen: "
     "libtorch's CPU kernels and customops' ExecuTorch kernels call it (a family with an ExecuTorch kernel)"),
    ("kernels/executorch/{family}.cpp", "ExecuTorch kernels: the op's out variant (<op>.out) on ExecuTorch's "
     "tensors, calling kernels/core/{family}.h, where it beats the core-ATen decomposition"),
    ("kernels/common/{family}.cpp", "host code the backends share where it is too much for the header (the "
     "convolutions' plans); a small family's checks and plans are inline in kernels/{family}.h"),
    ("kernels/meta/{family}.cpp", "Meta kernels: output shapes, dtypes and strides (a pointwise family has none: "
     "the shared ones)"),
    ("registration/{family}.cpp", "kernels per dispatch key, autograd (the backward and double backward), autocast; "
     "a pointwise family: one line, CUSTOMOPS_REGISTER_POINTWISE"),
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

# The lines every operator adds to files all operators share.
SHARED_EDITS: Tuple[Tuple[str, str], ...] = (
    ("registration/schemas.cpp", "the schemas of the op and its backward op (one place for every schema)"),
)

_MARK = re.compile(r"^(?P<indent>\s*)(?P<comment>//|#) scaffold: (?P<what>[^|]*?)\s*\|\s*(?P<stub>.*?)\s*$")
_END = re.compile(r"^\s*(//|#) scaffold-end\s*$")


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


@dataclass
class Plan:
    root: Path
    like: str
    name: str
    family: str  # the like op's family (its registration file's stem)
    class_name: str
    like_class: str
    writes: Dict[Path, str] = field(default_factory=dict)  # path -> new content (new files and shared edits)
    todos: List[str] = field(default_factory=list)


def find_root(start: Optional[Path] = None) -> Path:
    here = (start or Path(__file__)).resolve()
    for parent in [here, *here.parents]:
        if (parent / "registration" / "schemas.cpp").is_file() and (parent / "python" / "customops").is_dir():
            return parent
    raise SystemExit("customops.dev.new_op works on a source checkout of customops (with registration/schemas.cpp); "
                     "run it from one, or pass --root")


def family_of(root: Path, op: str) -> str:
    """The family of `op`: the registration file that registers its kernels."""
    pattern = re.compile(r'm\.impl\("' + re.escape(op) + r'"')
    pointwise = root / "registration" / f"{op}.cpp"
    if pointwise.is_file() and "CUSTOMOPS_REGISTER_POINTWISE(" in pointwise.read_text():
        return op
    owners = [p.stem for p in sorted((root / "registration").glob("*.cpp")) if pattern.search(p.read_text())]
    if not owners:
        raise SystemExit(f"--like {op}: no registration/<family>.cpp registers kernels of '{op}'")
    family = owners[0]
    ops = set(re.findall(r'm\.impl\("(\w+?)(?:_backward)?"', (root / "registration" / f"{family}.cpp").read_text()))
    if ops != {op}:
        raise SystemExit(f"--like {op}: its family '{family}' holds several operators ({', '.join(sorted(ops))}); "
                         "start from an operator that is alone in its family (quick_gelu, upsample_bilinear2d, "
                         "trilinear_interpolation)")
    return family


def family_files(root: Path, family: str) -> List[Path]:
    """Every file of `family` in the places of FAMILY_PLACES (folders expanded), relative to root."""
    out = []
    for pattern, _ in FAMILY_PLACES:
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
        out.append(f"{indent}{comment} TODO({plan.name}): {m['what']}\n")
        if m["stub"]:
            out.append(f"{indent}{m['stub']}\n")
        plan.todos.append(f"{where}:{len(out)}: {m['what']}")
        i = end + 1
    return "".join(out)


def _calls(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(node))


def module_class(root: Path, family: str, like: str) -> str:
    rel = f"python/customops/modules/{family}.py"
    if not (root / rel).is_file():  # a pointwise family's module is made from its formulas' MODULE
        formulas = ast.parse((root / f"python/customops/pointwise/{family}.py").read_text())
        found = [n.value.elts[0].value for n in formulas.body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "MODULE" for t in n.targets)]
        if len(found) != 1:
            raise SystemExit(f"python/customops/pointwise/{family}.py: expected MODULE = (class name, ...)")
        return found[0]
    tree = ast.parse((root / rel).read_text())
    found = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and _calls(n, like)]
    if len(found) != 1:
        raise SystemExit(f"{rel}: expected one module calling {like}, found {found}")
    return found[0]


def add_schemas(plan: Plan) -> None:
    path = plan.root / "registration/schemas.cpp"
    text = plan.writes.get(path) or path.read_text()
    statements = re.findall(r'^\s*m\.def\("' + re.escape(plan.like) + r'(?:_backward|\.out)?\(.*?\);\n', text,
                            re.M | re.S)
    if not statements:
        raise SystemExit(f"registration/schemas.cpp: no schema of {plan.like}")
    lib = text.index("TORCH_LIBRARY(customops, m) {")
    close = text.index("\n}\n", lib)
    new = "\n  // TODO({0}): the schemas' arguments.\n".format(plan.name) + "".join(renamer(plan)(s) for s in statements)
    plan.writes[path] = text[:close] + "\n" + new.rstrip("\n") + text[close:]
    plan.todos.append(f"registration/schemas.cpp: the schemas of {plan.name} and {plan.name}_backward")


def plan_op(root: Path, name: str, like: str, class_name: Optional[str], unmarked_maths: bool = False) -> Plan:
    """What the scaffold writes. `unmarked_maths` copies a family whose files mark no maths (the copy then computes
    the model op's maths under the new name, and passes its tests): for checking the renaming alone."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name.endswith("_backward"):
        raise SystemExit(f"NAME must be a lower-case identifier not ending in _backward, got {name!r}")
    schemas = (root / "registration/schemas.cpp").read_text()
    if re.search(r'm\.def\("' + re.escape(name) + r'\(', schemas) or (root / f"registration/{name}.cpp").exists():
        raise SystemExit(f"'{name}' exists already")
    family = family_of(root, like)
    plan = Plan(root, like, name, family, class_name or camel(name), module_class(root, family, like))
    rename = renamer(plan)
    files = family_files(root, family)
    reference = root / f"tests/python/op_db/{family}.py"
    if not unmarked_maths and not any(_MARK.match(line) for line in reference.read_text().splitlines()):
        raise SystemExit(f"--like {like}: its files mark no maths with 'scaffold:' regions yet, so the new op would "
                         f"compute {like}'s maths and pass its tests; start from quick_gelu or "
                         f"trilinear_interpolation, or mark {like}'s maths first (docs/design/adding_an_operator.md)")
    for rel in files:
        new_rel = Path(rename(str(rel)))
        target = root / new_rel
        if target.exists():
            raise SystemExit(f"{new_rel} exists already")
        plan.writes[target] = rename(stub_regions((root / rel).read_text(), str(new_rel), plan))
    add_schemas(plan)
    return plan


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m customops.dev.new_op", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="the new operator's name (lower case, e.g. silu_mul)")
    p.add_argument("--like", required=True, help="the operator to start from, e.g. quick_gelu")
    p.add_argument("--class-name", help="the nn.Module's name (default: the name in CamelCase)")
    p.add_argument("--root", type=Path, help="the source checkout (default: the one this package is in)")
    p.add_argument("--dry-run", action="store_true", help="list what would be written, write nothing")
    args = p.parse_args(argv)
    root = args.root.resolve() if args.root else find_root()
    plan = plan_op(root, args.name, args.like, args.class_name)
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
        print("\nNext: build (scripts/build.sh), then run the generic tests over the new op: "
              f"python -m pytest tests/python -k {args.name}; docs/design/adding_an_operator.md walks the rest.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
