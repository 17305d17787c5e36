"""The project's import graph, read from the sources (AST): every `import` and `from ... import`
anywhere in a module, inside functions included, and every use of another module's private
(`_name`) attributes.

    python tests/import_graph.py [ROOT]    # prints the package graph, module circles, private uses

Used by `tests/test_layering.py`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = (
    "native", "dynamics", "contact", "hardware", "trajopt", "controllers", "learning", "viz",
)  # fmt: skip

# What each package may import (besides itself): the layers
# native -> dynamics -> contact -> {hardware, trajopt} -> controllers -> learning; viz draws any
# of them and nothing imports viz.
ALLOWED = {
    "native": set(),
    "dynamics": {"native"},
    "contact": {"native", "dynamics"},
    "hardware": {"native", "dynamics", "contact"},
    "trajopt": {"native", "dynamics", "contact"},
    "controllers": {"native", "dynamics", "contact", "hardware", "trajopt"},
    "learning": {"native", "dynamics", "contact", "hardware", "trajopt", "controllers"},
    "viz": {"native", "dynamics", "contact", "hardware", "trajopt", "controllers", "learning"},
}


@dataclass
class Module:
    name: str  # dotted, e.g. "trajopt.engine.fddp"
    path: Path
    is_package: bool  # an __init__.py
    imports: list = field(default_factory=list)  # (line, imported dotted module)
    private_uses: list = field(default_factory=list)  # (line, dotted module, private name)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def python_files(root: Path, folders) -> list[Path]:
    files = []
    for folder in folders:
        base = root / folder
        if base.is_dir():
            files += sorted(
                p for p in base.rglob("*.py")
                if "__pycache__" not in p.parts
                and not any(part.startswith(".") for part in p.relative_to(base).parts)
            )  # hidden folders (a benchmark's own virtual environment) are not the project's
    return files


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    """The absolute dotted name an `ImportFrom` refers to (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    package = module.name.split(".")
    if not module.is_package:
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join(base + ([node.module] if node.module else []))


def read_module(root: Path, path: Path, known: set[str]) -> Module:
    """Parse `path`: its first-party imports (`known`: the dotted names of the project's
    modules) and its uses of other modules' private names."""
    module = Module(module_name(root, path), path, path.name == "__init__.py")
    tree = ast.parse(path.read_text(), filename=str(path))
    aliases = {}  # local name -> dotted module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    module.imports.append((node.lineno, alias.name))
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            if target.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                if child in known:  # `from pkg import module`
                    module.imports.append((node.lineno, child))
                    aliases[alias.asname or alias.name] = child
                else:  # `from module import name`
                    module.imports.append((node.lineno, target))
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        module.private_uses.append((node.lineno, target, alias.name))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            target = aliases[node.value.id]
            if target != module.name:
                module.private_uses.append((node.lineno, target, node.attr))
    return module


def read_project(root: Path, folders=PACKAGES) -> dict[str, Module]:
    files = python_files(root, folders)
    known = {module_name(root, p) for p in files}
    return {m.name: m for m in (read_module(root, p, known) for p in files)}


def package_violations(modules: dict[str, Module]) -> list[str]:
    """Imports from one package into another that the layers do not allow."""
    out = []
    for m in modules.values():
        own = m.name.split(".")[0]
        for line, target in m.imports:
            other = target.split(".")[0]
            if other != own and other not in ALLOWED[own]:
                out.append(f"{m.path}:{line}: {m.name} imports {target} ({own} -> {other})")
    return out


def module_edges(modules: dict[str, Module]) -> dict[str, set[str]]:
    """`module -> {imported modules}` among the project's modules. A package's `__init__` is
    a node of its own: importing `pkg` is an edge to it, not to every module below it."""
    edges = {name: set() for name in modules}
    for m in modules.values():
        for _, target in m.imports:
            while target and target not in modules:  # `from pkg.mod import name` of a package
                target = target.rpartition(".")[0]
            if target and target != m.name:
                edges[m.name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def private_uses(modules: dict[str, Module]) -> list[str]:
    """Uses of another module's `_private` names."""
    return [
        f"{m.path}:{line}: {m.name} uses {target}.{name}"
        for m in modules.values()
        for line, target, name in m.private_uses
    ]


def main(root: Path) -> int:
    modules = read_project(root)
    problems = package_violations(modules)
    for component in circles(module_edges(modules)):
        problems.append("circle: " + " -> ".join(component))
    problems += private_uses(modules)
    graph = {}
    for m in modules.values():
        own = m.name.split(".")[0]
        graph.setdefault(own, set()).update(
            t.split(".")[0] for _, t in m.imports if t.split(".")[0] != own
        )
    for package in PACKAGES:
        print(f"{package:12s} -> {', '.join(sorted(graph.get(package, ()))) or '-'}")
    print("\n".join(problems) or "no layering violation, no circle, no private use")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1])))
