"""The admission tests' one running server: `serve` over real HTTPS, started once per module.

A module's tests take the `server` fixture. What it starts is the module's `SERVER`: a
function from the server's directory to a context manager that starts it there and yields
what the tests talk to; without one, `serve` on the bundled example state, yielding
(url, session) (tests.support.serving.serve_example). A module that runs its tests against
several configurations parametrises `server` indirectly, scope="module": then `SERVER` is
called with the directory and the parameter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.serving import serve_example


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    start = getattr(request.module, "SERVER", serve_example)
    name = request.module.__name__.rpartition(".")[2]
    params = (request.param,) if hasattr(request, "param") else ()
    directory = tmp_path_factory.mktemp("-".join([name, *map(str, params)]))
    with start(directory, *params) as running:
        yield running
