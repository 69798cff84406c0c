"""Every package's module map lists exactly its modules, so the maps cannot go stale.

A package's docstring maps it: one `- name.py` (or `- name/` for a subpackage) line per
module, several names on a line allowed. The core and the admission webhook are read by
their maps, so each of their packages must have one; any other package that has one
must keep it complete.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAPPED = ("webhook/core", "webhook/admission")  # every package below these has a map
ENTRY = re.compile(r"^- (.+?)(?: {2,}|$)")


def listed(init: Path) -> set[str] | None:
    """The modules a package's docstring lists, or None when it has no map."""
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    names: set[str] = set()
    for line in docstring.splitlines():
        match = ENTRY.match(line)
        if match:
            names.update(re.findall(r"[\w]+\.py|[\w]+/", match.group(1)))
    return names or None


def modules(package: Path) -> set[str]:
    found = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    return found | {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()}


PACKAGES = sorted(p.parent for p in (REPO / "webhook").rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_package_map_lists_exactly_its_modules(package: Path) -> None:
    names = listed(package / "__init__.py")
    where = str(package.relative_to(REPO))
    if names is None:
        assert not where.startswith(MAPPED), f"{where}/__init__.py has no module map"
        return
    assert names == modules(package), (
        f"{where}/__init__.py: missing {sorted(modules(package) - names)}, "
        f"not there {sorted(names - modules(package))}")


def test_the_map_reader_reads_several_names_a_line(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text('"""A package.\n\n- a.py, b.py   two\n- sub/          one\n"""\n')
    assert listed(init) == {"a.py", "b.py", "sub/"}
    init.write_text('"""A package without a map."""\n')
    assert listed(init) is None


def test_no_core_folder_holds_more_than_15_modules() -> None:
    for package in PACKAGES:
        if str(package.relative_to(REPO)).startswith("webhook/core"):
            assert len(modules(package)) <= 15, package
