"""An allow-all webhook under exactly the settings `serve` uses: the benchmark's baseline."""

from __future__ import annotations

import sys

import orjson
from flask import Flask, Response, request

from webhook.admission.server import GunicornServer
from webhook.cli.main import build_parser


def allow_all_app(_args) -> Flask:
    app = Flask("allow-all")

    @app.post("/allow-all")
    def allow_all() -> Response:
        uid = orjson.loads(request.get_data())["request"]["uid"]
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": True}}
        return Response(orjson.dumps(body), content_type="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("{}", mimetype="application/json")

    return app


if __name__ == "__main__":
    arguments = build_parser().parse_args(["serve", *sys.argv[1:]])
    GunicornServer(arguments, app_factory=allow_all_app).run()
