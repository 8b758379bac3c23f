"""The package's modules import in one direction: core <- envs <- wrappers <- algos, with no circle,
and the frameworks (JAX, Flax, optax, torch) only inside the two backend packages."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"textgym": "textgym", "textgym.envs": "envs", "textgym.wrappers": "wrappers", "textgym.algos": "algos"}
LAYERS = ("textgym", "textgym.envs", "textgym.wrappers", "textgym.algos")  # each may import those before it
FRAMEWORKS = {"torch", "jax", "jaxlib", "flax", "optax"}
BACKENDS = ("textgym.algos.jax", "textgym.algos.torch")


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if package == "textgym" and parts[0] in ("envs", "wrappers", "algos"):
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


class Import(NamedTuple):
    target: str
    lazy: bool
    """Whether the import runs only when a function is called."""


def imports(path: Path, name: str, table: Collection[str]) -> list[Import]:
    """The modules of ``table`` that module ``name`` (at ``path``) imports: ``from a.b import c``
    imports ``a.b.c`` when that is a module, else ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                found.extend(Import(f"{base}.{a.name}" if f"{base}.{a.name}" in table else base, lazy) for a in child.names)
            visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def graph() -> dict[str, dict[str, bool]]:
    """Module -> the package's modules it imports -> whether only lazily."""
    table = modules()
    edges: dict[str, dict[str, bool]] = {}
    for name, path in table.items():
        out: dict[str, bool] = {}
        for target, lazy in imports(path, name, table):
            if target in table and target != name:
                out[target] = out.get(target, True) and lazy
        edges[name] = out
    return edges


def cycles(edges: dict[str, dict[str, bool]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in edges:
        if v not in index:
            connect(v)
    return found


def layer(name: str) -> int:
    return max(i for i, prefix in enumerate(LAYERS) if name == prefix or name.startswith(prefix + "."))


def is_command(name: str) -> bool:
    """The command line's modules, which reach up to run a command (lazily, inside it)."""
    return name == "textgym.cli" or name.endswith(".command")


def test_no_module_imports_itself_through_others():
    assert cycles(graph()) == []


def test_imports_flow_from_the_core_up_to_the_trainers_only():
    upward = [
        f"{name} -> {target}"
        for name, out in graph().items()
        for target, lazy in out.items()
        if layer(target) > layer(name) and not (lazy and is_command(name))
    ]
    assert upward == []


def test_the_frameworks_are_imported_only_by_the_backends():
    found = [
        f"{name}: {imp.target}"
        for name, path in modules().items()
        if not name.startswith(BACKENDS)
        for imp in imports(path, name, ())
        if imp.target.split(".")[0] in FRAMEWORKS
    ]
    assert found == []


def test_the_walk_sees_a_circle_and_an_upward_arrow(tmp_path):
    # The checks above can fail: two modules that import each other, and a core module importing algos.
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from textgym.algos import b\n")
    b.write_text("def f():\n    import textgym.algos.a\n")
    table = ("textgym.algos.a", "textgym.algos.b")
    assert imports(a, "textgym.algos.a", table) == [("textgym.algos.b", False)]
    assert imports(b, "textgym.algos.b", table) == [("textgym.algos.a", True)]
    assert cycles({"textgym.algos.a": {"textgym.algos.b": False}, "textgym.algos.b": {"textgym.algos.a": True}}) == [
        ["textgym.algos.a", "textgym.algos.b"]
    ]
    assert layer("textgym.policies.model") < layer("textgym.algos.backends") and not is_command("textgym.policies.model")


def test_backend_and_model_loading_import_no_policy_module():
    # textgym.algos.backends.load_model_policy imports textgym.policies lazily; these must not import it on their own.
    code = (
        "import sys, textgym.algos.backends, textgym.algos.models, textgym.algos.rollouts.token_envs; "
        "print(sorted(m for m in sys.modules if m.startswith('textgym.policies')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_library_modules_take_argument_helpers_from_their_own_module():
    code = "import sys, textgym.algos.config.flags, textgym.evaluate.command, textgym.serve.command; print('textgym.cli' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
