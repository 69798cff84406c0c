"""`python -m webhook.deploy_gen [--root DIR] [--check]`: write (or check) the deploy
files' generated blocks from the workload-kind registry (`make generate`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .blocks import BlockError, fill
from .targets import CHART_SCHEMA, blocks, schema_text

REPO = Path(__file__).resolve().parents[2]


def generated(root: Path) -> dict[str, tuple[str, str]]:
    """{path: (its text now, its text generated)} for every file with generated parts."""
    texts = {}
    for path, file_blocks in blocks().items():
        current = (root / path).read_text(encoding="utf-8")
        texts[path] = (current, fill(current, file_blocks, path))
    current = (root / CHART_SCHEMA).read_text(encoding="utf-8")
    texts[CHART_SCHEMA] = (current, schema_text(current))
    return texts


def main(argv: list[str] | None = None) -> int:
    """Write the generated parts under --root; with --check, only name the stale files."""
    parser = argparse.ArgumentParser(
        prog="python -m webhook.deploy_gen",
        description="Regenerate the webhook rules, RBAC rules and chart switches of the "
                    "kustomize base and the Helm chart from the workload-kind registry.")
    parser.add_argument("--root", type=Path, default=REPO,
                        help="the repository to write into (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming the files that are not current")
    options = parser.parse_args(argv)
    try:
        texts = generated(options.root)
    except (OSError, BlockError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stale = [path for path, (current, new) in texts.items() if current != new]
    if options.check:
        for path in stale:
            print(f"{path}: not current; run `make generate`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        (options.root / path).write_text(texts[path][1], encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
