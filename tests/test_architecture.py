"""The shape of the code: no import cycle, a pure core, modules of a readable size.

- No import cycle anywhere in the repository: webhook/, certs/, bench/ and tests/.
- webhook/core is the shared truth of the admission server, the reconciler and `plan`,
  so it must stay free of I/O: it imports only the standard library and itself, and
  never opens a file, a socket or a process. The reconciler's decision (webhook/
  reconciler/decide.py) is held to the same rule, with the core as its only project
  import.
- A module of webhook/ or certs/ has at most MAX_LINES lines, unless its docstring says
  why it needs more: a paragraph that starts with `Size:` and gives the reason, e.g.

      Size: the cache and the reflectors that feed it share one lock and one store.

- Nothing edits `sys.path`: the packages are imported from the repository root
  (pytest's root, `python -m bench.<name>`, `python -m webhook`).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("webhook", "certs", "bench", "tests")
SIZED = ("webhook", "certs")  # the packages held to MAX_LINES
MAX_LINES = 450
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
    assert {"webhook.core.replicaset.active_pods_with_ranks", "webhook.admission.app",
            "webhook.cli.main",
            "webhook.reconciler.service", "certs.cli", "bench.bench_cache",
            "tests.support.kubeapi", "tests.test_architecture"} <= set(graph)
    assert "webhook.cluster.state" in graph["webhook.cli.plan"]  # relative imports resolve
    assert "webhook.admission.server" in graph["webhook.cli.serve"]  # lazy imports count
    assert "bench.heyrun" in graph["bench.bench_server"]  # `from . import module`
    assert "tests.support.factories" in graph["bench.bench_core"]


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


# --- module size ---------------------------------------------------------------------


def size_reason(source: str) -> str | None:
    """The reason a module's docstring gives for its size (its `Size:` paragraph), or None."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    paragraphs = [" ".join(p.split()) for p in docstring.split("\n\n")]
    for paragraph in paragraphs:
        if paragraph.startswith("Size:"):
            reason = paragraph.removeprefix("Size:").strip()
            return reason if len(reason.split()) >= 5 else None
    return None


def test_modules_over_the_size_limit_say_why() -> None:
    unexplained = []
    for name, path in sorted(MODULES.items()):
        if name.partition(".")[0] not in SIZED:
            continue
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_LINES and size_reason(source) is None:
            unexplained.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert not unexplained, (f"over {MAX_LINES} lines with no `Size:` paragraph in the "
                             "docstring saying why: " + ", ".join(unexplained))


def test_the_size_reason_is_read_from_the_docstring() -> None:
    stated = '"""A module.\n\nSize: one parser per command, beside the code reading it.\n"""'
    assert size_reason(stated) == "one parser per command, beside the code reading it."
    wrapped = '"""A module.\n\nSize: one parser per command,\nbeside the code reading it.\n"""'
    assert size_reason(wrapped) == "one parser per command, beside the code reading it."
    assert size_reason('"""A module.\n\nSize: big.\n"""') is None  # no reason given
    assert size_reason('"""A module of some Size: mentioned in passing."""') is None
    assert size_reason('# Size: a comment is not the docstring, it says nothing\n') is None


# --- sys.path -------------------------------------------------------------------------

SYS_PATH_EDITS = {"insert", "append", "extend", "remove", "pop", "clear"}


def edits_sys_path(source: str) -> list[int]:
    """Lines of `source` that change `sys.path`: a mutating call on it, an assignment to it."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SYS_PATH_EDITS):
            changed = [node.func.value]
        elif isinstance(node, ast.Assign):
            changed = node.targets
        elif isinstance(node, ast.AugAssign):
            changed = [node.target]
        else:
            continue
        if any(_is_sys_path(t.value if isinstance(t, ast.Subscript) else t) for t in changed):
            lines.append(node.lineno)
    return lines


def _is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def test_nothing_edits_sys_path() -> None:
    edits = [f"{path.relative_to(REPO)}:{line}" for path in MODULES.values()
             for line in edits_sys_path(path.read_text(encoding="utf-8"))]
    assert not edits, "sys.path edited at " + ", ".join(edits)


def test_sys_path_edits_are_seen() -> None:
    assert edits_sys_path("import sys\nsys.path.insert(0, 'x')\n") == [2]
    assert edits_sys_path("import sys\nsys.path[:0] = ['x']\n") == [2]
    assert edits_sys_path("import sys\nsys.path += ['x']\n") == [2]
    assert edits_sys_path("import sys\nprint(sys.path[0], sys.path.index('x'))\n") == []


# The lowest core packages and the only core packages each may import: the objects read API
# dicts and know nothing of poolguard; the policy is read by cost and consolidation, never
# the reverse.
LEAVES = {
    "webhook.core.objects": ("webhook.core.objects", "webhook.core.errors"),
    "webhook.core.policy": ("webhook.core.policy", "webhook.core.objects", "webhook.core.errors"),
}


@pytest.mark.parametrize("package", sorted(LEAVES))
def test_the_low_core_packages_import_nothing_above_them(package: str) -> None:
    allowed = LEAVES[package]
    above = [f"{name}:{line} imports {target}"
             for name in CORE if name == package or name.startswith(package + ".")
             for target, line in imports_of(name)
             if target.startswith("webhook.") and not any(
                 target == low or target.startswith(low + ".") for low in allowed)]
    assert above == []
