"""The core as it was at a given commit, importable beside today's for side-by-side runs.

Benchmarks compare old and new code in one process (the machine is shared, so only
ratios within one run mean anything). `load_core(commit)` copies `webhook/core` from
that commit (through `git show`) into a temporary directory and imports it from there as
a package of another name (its modules import each other relatively).
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
# The last commit before the core's fast path: the baseline of the core figures.
BASELINE_COMMIT = "b9a5592"


def load_core(commit: str = BASELINE_COMMIT, name: str = "baseline_core") -> ModuleType:
    """Import `webhook/core` as of `commit` under the package name `name`."""
    if name in sys.modules:
        return sys.modules[name]
    listing = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", commit,
                              "webhook/core/"], check=True, capture_output=True, text=True)
    target = Path(tempfile.mkdtemp(prefix="poolguard-baseline-")) / name
    target.mkdir()
    for path in listing.stdout.split():
        if path.endswith(".py"):
            source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                                    check=True, capture_output=True, text=True).stdout
            (target / Path(path).name).write_text(source)
    spec = importlib.util.spec_from_file_location(
        name, target / "__init__.py", submodule_search_locations=[str(target)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package  # before it runs: its modules import it by name
    spec.loader.exec_module(package)
    return package


def core_module(package: ModuleType, module: str) -> ModuleType:
    """`package.module`, imported."""
    return importlib.import_module(f"{package.__name__}.{module}")
