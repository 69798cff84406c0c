"""The fake API server (tests/support/kubeapi/) in a process of its own, for benchmarks.

    serve_fake_api(kubeconfig, objects)            # these objects
    serve_fake_api(kubeconfig, realistic_pods=N)   # N pods shaped like a real cluster's

Its own process, so its serving does not share an interpreter (and a GIL) with the
process measured. The returned process serves until its stdin is closed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.realistic import realistic_pod

ROOT = Path(__file__).resolve().parent.parent


def serve_fake_api(kubeconfig: Path, objects: Iterable[dict] = (), *,
                   realistic_pods: int = 0) -> subprocess.Popen:
    """Start the fake API server holding `objects` and `realistic_pods` pods of
    tests.support.realistic; returns once it listens, its kubeconfig written."""
    command = [sys.executable, "-m", "bench.fake_api", "--kubeconfig", str(kubeconfig),
               "--realistic-pods", str(realistic_pods)]
    objects = list(objects)
    if objects:
        source = kubeconfig.with_suffix(".objects.json")
        source.write_text(json.dumps(objects))
        command += ["--objects", str(source)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               cwd=ROOT)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        process.kill()
        raise RuntimeError(f"the fake API server did not start (exit code {process.wait()})")
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--objects", type=Path, help="a JSON list of objects to serve")
    parser.add_argument("--realistic-pods", type=int, default=0)
    args = parser.parse_args()
    api = FakeKubeAPI().start()
    if args.objects:
        api.put(*json.loads(args.objects.read_text()))
    api.put(*(realistic_pod(i) for i in range(args.realistic_pods)))
    api.write_kubeconfig(args.kubeconfig)
    print("ready", flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    api.stop()


if __name__ == "__main__":
    main()
