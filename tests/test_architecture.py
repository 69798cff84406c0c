"""The import graph: no cycles anywhere in webhook/ and certs/, and a pure core.

webhook/core is the shared truth of the admission server, the reconciler and `plan`, so
it must stay free of I/O: it imports only the standard library and itself, and never
opens a file, a socket or a process. The reconciler's decision (webhook/reconciler/
decide.py) is held to the same rule, with the core as its only project import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("webhook", "certs")
# Standard-library modules that reach files, sockets, processes or the environment.
IO_MODULES = {"os", "io", "pathlib", "shutil", "tempfile", "socket", "ssl", "subprocess",
              "http", "urllib", "select", "selectors", "asyncio", "signal", "mmap", "glob",
              "fileinput", "sqlite3", "logging", "threading", "multiprocessing"}
IO_BUILTINS = {"open", "print", "input", "exec", "eval", "compile", "__import__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}


def imports_of(name: str) -> list[tuple[str, int]]:
    """Every module `name` imports (at any depth of the file, lazy imports too), with lines."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            # `from package import module` imports the module too
            found += [(f"{target}.{alias.name}", node.lineno) for alias in node.names
                      if f"{target}.{alias.name}" in MODULES]
    return found


def project_graph() -> dict[str, set[str]]:
    return {name: {target for target, _ in imports_of(name)
                   if target in MODULES and target != name}
            for name in MODULES}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_walk_sees_the_whole_project() -> None:
    graph = project_graph()
    assert {"webhook.core.active_pods_with_ranks", "webhook.admission.app", "webhook.cli.main",
            "webhook.reconciler.service", "certs.cli"} <= set(graph)
    assert "webhook.cluster.state" in graph["webhook.cli.plan"]  # relative imports resolve
    assert "webhook.admission.gunicorn" in graph["webhook.cli.serve"]  # lazy imports count


def test_no_import_cycles() -> None:
    assert find_cycle(project_graph()) is None, " -> ".join(find_cycle(project_graph()) or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


CORE = sorted(name for name in MODULES if name.startswith("webhook.core"))
PURE = [*CORE, "webhook.reconciler.decide"]


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_only_the_standard_library_and_the_core(name: str) -> None:
    for target, line in imports_of(name):
        top = target.partition(".")[0]
        if target == "webhook.core" or target.startswith("webhook.core."):
            continue
        assert top in sys.stdlib_module_names, f"{MODULES[name]}:{line} imports {target}"
        assert top not in IO_MODULES, f"{MODULES[name]}:{line} imports {target} (I/O)"


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_do_no_io(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in IO_BUILTINS, (
                f"{MODULES[name]}:{node.lineno} calls {node.func.id}()")
        if isinstance(node, ast.Attribute) and node.attr in {
                "read_text", "write_text", "read_bytes", "write_bytes", "open", "unlink",
                "mkdir", "stat", "system", "popen", "environ", "getenv"}:
            pytest.fail(f"{MODULES[name]}:{node.lineno} uses .{node.attr} (I/O)")
