"""Recipes and examples in the docs match what ships and keep working."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import requests
import yaml

from certs import pki
from tests.support.install import PY, REPO, run
from tests.support.serving import running_server

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




# --- the example reviews ----------------------------------------------------------------

CURL = re.compile(r"--data @(examples/reviews/[\w.-]+\.json)\s+https://localhost:8443(/[\w-]+)")


def _documented_reviews() -> dict[str, set[str]]:
    """Each review file the README and docs post with curl, and the endpoints they post it to."""
    posted: dict[str, set[str]] = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for match in CURL.finditer(doc.read_text().replace("\\\n", " ")):
            posted.setdefault(match.group(1), set()).add(match.group(2))
    return posted


def _patch(answer: dict) -> list[dict]:
    return json.loads(base64.b64decode(answer["patch"]))


def _cost_patch(answer: dict) -> dict:
    [op] = _patch(answer)
    return op["value"]


ANSWERS = {  # what docs/serving.md "Trying the endpoints" says each one gets
    ("pod-create.json", "/mutate-pods"): lambda a: a["allowed"] and _cost_patch(a) == {
        "controller.kubernetes.io/pod-deletion-cost": "-100",
        "poolguard.dev/managed-deletion-cost": "-100", "poolguard.dev/pool": "hybrid"},
    ("binding.json", "/mutate-bindings"): lambda a: a["allowed"] and _cost_patch(a)[
        "poolguard.dev/pool"] == "hybrid",
    ("scale-deployment.json", "/validate-scale"): lambda a: (
        not a["allowed"] and a["status"]["code"] == 403
        and "llm-serve-7c9d8f6b5-x7k2p" in a["status"]["message"]
        and "llm-serve-7c9d8f6b5-k4z9s" in a["status"]["message"]
        and "fix: scale to 4 replicas" in a["status"]["message"]),
    ("scale-deployment-hpa.json", "/mutate-scale"): lambda a: (
        a["allowed"] and _patch(a) == [{"op": "replace", "path": "/spec/replicas", "value": 4}]
        and any("from 6 to 4 replicas" in w for w in a["warnings"])),
    ("scale-statefulset.json", "/validate-scale"): lambda a: (
        a["allowed"] and a["auditAnnotations"]["victims"] == "kv-cache-2,kv-cache-1"),
    ("scale-leaderworkerset.json", "/validate-scale"): lambda a: (
        a["allowed"] and a["auditAnnotations"]["victims"] == "llm-multi-2,llm-multi-2-1"),
    ("scale-rollout.json", "/validate-scale"): lambda a: (
        a["allowed"] and a["auditAnnotations"]["victims"].split(",") == [
            # the hybrid pods in their nodes' rank order, then one inference pod
            "reranker-6d4b8c7f5-j7k8l", "reranker-6d4b8c7f5-g5h6i", "reranker-6d4b8c7f5-d3e4f"]),
}


def test_every_example_review_is_posted_by_a_doc_command() -> None:
    shipped = {f"examples/reviews/{p.name}" for p in (REPO / "examples" / "reviews").glob("*.json")}
    documented = _documented_reviews()
    assert set(documented) == shipped
    assert {(Path(file).name, path) for file, paths in documented.items()
            for path in paths} >= set(ANSWERS)


def test_the_documented_curl_commands_get_the_documented_answers(tmp_path: Path) -> None:
    """Each README and docs curl command, against `serve` started as `make run` starts it."""
    with running_server(tmp_path, "--state", "examples/cluster-state.yaml",
                        "--policy", "examples/policy.yaml") as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        for file, paths in sorted(_documented_reviews().items()):
            body = json.loads((REPO / file).read_text())
            for path in sorted(paths):
                reply = session.post(url + path, json=body, timeout=30)
                assert reply.status_code == 200, (file, path, reply.text)
                answer = reply.json()["response"]
                assert answer["uid"] == body["request"]["uid"]
                check = ANSWERS.get((Path(file).name, path))
                assert check is not None and check(answer), (file, path, answer)
        session.close()


# --- the install path -------------------------------------------------------------------

SH_BLOCK = re.compile(r"```sh (?:run|check)\n(.*?)```", re.S)


def _shell_lines(text: str) -> list[str]:
    return [line for block in SH_BLOCK.findall(text)
            for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_every_helm_install_in_the_docs_starts_in_dryrun() -> None:
    """The docs advise an audit first; their install commands do what they advise."""
    installs = [(doc.name, line) for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]
                for line in _shell_lines(doc.read_text()) if "helm install" in line]
    assert installs
    for doc, line in installs:
        assert "enforcement=dryrun" in line or "dryrun-values.yaml" in line, (doc, line)


def test_install_doc_says_how_to_move_from_dryrun_to_enforce() -> None:
    text = (REPO / "docs" / "install.md").read_text()
    helm_c = text[text.index("## Path C: Helm"):text.index("### Certificates")]
    lines = _shell_lines(helm_c)
    assert any("helm upgrade" in line and "--reuse-values" in line
               and "enforcement=enforce" in line for line in lines), lines
    before = text[text.index("## Before you start"):text.index("## Path A")]
    assert "scaleDown.enforcement: dryrun" in before


def test_readme_builds_and_pushes_the_image_before_the_helm_install() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Installing into a cluster"):
                     readme.index("## Policy reference")]
    lines = _shell_lines(section)
    install = next(i for i, line in enumerate(lines) if "helm install" in line)
    build = next(i for i, line in enumerate(lines) if line.startswith("make image IMAGE="))
    push = next(i for i, line in enumerate(lines) if line.startswith("docker push "))
    assert build < push < install
    image = lines[build].split("IMAGE=")[1].split()[0]
    assert lines[push].split()[2] == image
    repository, tag = image.rsplit(":", 1)
    assert f"--set image.repository={repository}" in lines[install]
    chart = yaml.safe_load((REPO / "charts" / "poolguard" / "Chart.yaml").read_text())
    assert tag == chart["appVersion"]  # the tag the chart uses when none is set
    assert "Dockerfile" in section and "certificate Jobs" in section


# --- how long things take ---------------------------------------------------------------


def _minutes(measured: str) -> int:
    """"10m50s" as whole minutes, rounded."""
    minutes, seconds = re.fullmatch(r"(\d+)m(\d+)s", measured).groups()
    return round(int(minutes) + int(seconds) / 60)


def _measured(table: str, row: str) -> str:
    """The time column of the row of performance.md's build and test times that starts
    with `row`."""
    found = re.search(rf"^\| {re.escape(row)} \| ([^|]*?) \|", table, re.M)
    assert found, f"docs/performance.md: no row {row!r} in the build and test times"
    return found.group(1)


def test_quick_start_and_development_docs_give_the_same_times() -> None:
    """The README's table and development.md's test tiers say what the measured runs in
    performance.md's table of build and test times found."""
    readme = (REPO / "README.md").read_text()
    development = (REPO / "docs" / "development.md").read_text()
    performance = (REPO / "docs" / "performance.md").read_text()
    table = performance[performance.index("## Build and test times"):]
    cold_test = _minutes(re.match(r"(\d+m\d+s) with",
                                  _measured(table, "`make test`, cold (in that run)")).group(1))
    warm_test = _minutes(_measured(table, "`make test`, warm"))
    build = _minutes(re.match(r"(\d+m\d+s) in all",
                              _measured(table, "control plane build, cold (in that run)")
                              ).group(1))
    cold_e2e = _minutes(re.match(r"(\d+m\d+s):",
                                 _measured(table, "`make e2e`, cold (in that run)")).group(1))
    warm_e2e = _minutes(_measured(table, "`make e2e`, warm"))

    test_row = re.search(r"^\| `make test` \|.*\| about (\d+) minutes on a cold 2-core machine"
                         r" \(the helm build included\), (\d+) warm \|$", readme, re.M)
    assert test_row and (int(test_row[1]), int(test_row[2])) == (cold_test, warm_test)
    tier = re.search(r"\*\*`make test`\*\* \(about (\d+) minutes cold, (\d+) warm", development)
    assert tier and (int(tier[1]), int(tier[2])) == (cold_test, warm_test)

    e2e_row = re.search(r"^\| `make e2e` \|.*\| about (\d+) minutes for the first build, "
                        r"(\d+)-(\d+) minutes a run", readme, re.M)
    assert e2e_row and int(e2e_row[1]) == build
    assert (int(e2e_row[2]), int(e2e_row[3])) == (min(cold_e2e, warm_e2e),
                                                  max(cold_e2e, warm_e2e))
