"""Recipes and examples in the docs match what ships and keep working."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from certs import pki
from tests.support.install import PY, REPO, run

# --- docs -------------------------------------------------------------------------------


def _yaml_block_after(path: Path, heading: str) -> list[dict]:
    text = path.read_text()
    section = text[text.index(heading):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    return [doc for doc in yaml.safe_load_all(block) if doc]


def test_reconciler_doc_rbac_is_the_shipped_rbac():
    documented = _yaml_block_after(REPO / "docs" / "reconciler.md", "## RBAC")
    shipped = {(d["kind"], d["metadata"]["name"]): d for d in
               yaml.safe_load_all((REPO / "manifests" / "base" / "rbac.yaml").read_text()) if d}
    assert len(documented) == 2
    for role in documented:
        match = shipped[(role["kind"], role["metadata"]["name"])]
        assert role["rules"] == match["rules"], role["metadata"]["name"]


def test_ca_rotation_recipe_keeps_the_local_names(tmp_path):
    text = (REPO / "docs" / "install.md").read_text()
    recipe = text[text.index("### Rotating the CA"):]
    command = re.search(r"python -m certs create (.*?)(?<!\\)\n", recipe, re.S).group(1)
    args = [a for a in command.replace("\\\n", " ").split("#")[0].split()]
    args[args.index("--out-dir") + 1] = str(tmp_path / "new")
    result = run(PY, "-m", "certs", "create", *args)
    assert result.returncode == 0, result.stderr
    cert = (tmp_path / "new" / "tls.crt").read_bytes()
    assert "localhost" in pki.san_dns_names(cert)
    assert pki.san_ip_addresses(cert) == ["127.0.0.1"]


