"""The shape of the code: no import cycle, a pure core in layers, modules of a readable size.

- No import cycle anywhere in the repository: webhook/, certs/, bench/ and tests/, and
  none between the packages of webhook/ either (a cycle of packages is a tangle even when
  each module's imports are acyclic).
- webhook/core is the shared truth of the admission server, the reconciler and `plan`,
  so it must stay free of I/O: it imports only the standard library and itself, and
  never opens a file, a socket or a process. The reconciler's decision (webhook/
  reconciler/decide.py) is held to the same rule, with the core as its only project
  import.
- The core's packages stand in layers (CORE_LAYERS): a package imports only its own
  layer and the ones below. The kind packages (one per controller) are reached only
  through the registry, `webhook.core.kinds`: nothing else in webhook/ names a kind.
- A module of webhook/ or certs/ has at most MAX_LINES lines; a module of tests/ or
  bench/ at most MAX_TEST_LINES.
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
MAX_TEST_LINES = 800  # tests/ and bench/
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


def test_no_module_is_over_the_size_limit() -> None:
    over = []
    for name, path in sorted(MODULES.items()):
        limit = MAX_LINES if name.partition(".")[0] in SIZED else MAX_TEST_LINES
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            over.append(f"{path.relative_to(REPO)}: {lines} lines (at most {limit})")
    assert not over, "split by concept: " + ", ".join(over)


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


# --- packages and layers --------------------------------------------------------------

# The core's packages from the bottom up. A package imports only packages of its own layer
# and the layers below (and, by test_no_package_cycles, never one that imports it back).
# The objects read API dicts and know nothing of poolguard; the model is what every kind
# returns; the policy is read by cost, consolidation and scale, never the reverse; the kind
# packages port one controller each and build on the model and the view; the registry
# (`kinds`) is the one joint between them and the rest.
KIND_PACKAGES = ("replicaset", "deployment", "statefulset", "leaderworkerset",
                 "argorollouts", "cloneset")
CORE_LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "objects"),
    ("model", "policy"),
    ("view",),
    KIND_PACKAGES,
    ("kinds",),
    ("cost", "consolidation", "scale"),
)
LAYER_OF = {f"webhook.core.{package}": level
            for level, packages in enumerate(CORE_LAYERS) for package in packages}
KINDS = tuple(f"webhook.core.{package}" for package in KIND_PACKAGES)
REGISTRY = "webhook.core.kinds"


def package_of(module: str) -> str:
    """The package a module belongs to, as the layers are drawn: `webhook.core.scale.clamp`
    -> `webhook.core.scale`, `webhook.cli.plan` -> `webhook.cli`, `webhook.errors` ->
    `webhook.errors`."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[:2] == ["webhook", "core"] else parts[:2])


def package_imports() -> dict[str, set[tuple[str, str, int]]]:
    """For each package of webhook/: (imported package, importing module, line) for every
    import of another package of webhook/."""
    found: dict[str, set[tuple[str, str, int]]] = {}
    for name in MODULES:
        if not name.startswith("webhook."):
            continue
        here = package_of(name)
        edges = found.setdefault(here, set())
        for target, line in imports_of(name):
            if target.startswith("webhook.") and package_of(target) != here:
                edges.add((package_of(target), name, line))
    return found


def test_no_package_cycles() -> None:
    graph = {package: {target for target, _, _ in edges}
             for package, edges in package_imports().items()}
    for targets in graph.values():
        graph.update({t: graph.get(t, set()) for t in targets})
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_every_core_package_has_a_layer() -> None:
    packages = {package_of(name) for name in CORE if name != "webhook.core"}
    assert packages == set(LAYER_OF), "add the package to CORE_LAYERS"


Edge = tuple[str, str, int]  # (imported package, importing module, line)


def above_its_layer(package: str, edges: set[Edge]) -> list[str]:
    """The imports of `package` that reach a higher layer (or a package with none)."""
    return [f"{name}:{line} imports {target} (layer {LAYER_OF.get(target)} > "
            f"{LAYER_OF[package]})" for target, name, line in sorted(edges)
            if target != "webhook.core" and LAYER_OF.get(target, 99) > LAYER_OF[package]]


def reaching_kinds(imports: dict[str, set[Edge]]) -> list[str]:
    """The imports of a kind package from anywhere but another kind or the registry."""
    return [f"{name}:{line} imports {target}" for package, edges in sorted(imports.items())
            if package not in KINDS and package != REGISTRY
            for target, name, line in sorted(edges) if target in KINDS]


@pytest.mark.parametrize("package", sorted(LAYER_OF))
def test_a_core_package_imports_only_its_layer_and_below(package: str) -> None:
    assert above_its_layer(package, package_imports().get(package, set())) == []


def test_only_the_registry_imports_the_kind_packages() -> None:
    assert reaching_kinds(package_imports()) == []


def test_the_layer_checks_see_violations() -> None:
    assert package_of("webhook.core.scale.clamp") == "webhook.core.scale"
    assert package_of("webhook.cli.plan") == "webhook.cli"
    judge = ("webhook.core.scale", "webhook.core.replicaset.fix", 3)
    assert above_its_layer("webhook.core.replicaset", {judge}) == [
        "webhook.core.replicaset.fix:3 imports webhook.core.scale (layer 5 > 3)"]
    assert above_its_layer("webhook.core.scale", {("webhook.core.model", "m", 1)}) == []
    kind = ("webhook.core.replicaset", "webhook.cli.plan_document", 22)
    assert reaching_kinds({"webhook.cli": {kind}}) == [
        "webhook.cli.plan_document:22 imports webhook.core.replicaset"]
    assert reaching_kinds({REGISTRY: {kind}, "webhook.core.deployment": {kind}}) == []
