"""The admission webhook: AdmissionReviews answered over HTTPS under gunicorn.

A request travels down this list; each module builds on the ones below it:

- server.py       `serve`'s gunicorn, configured in code: worker class, TLS, process hooks
- worker.py       the gevent worker: TLS per connection, deadlines, whole bodies read first
- http11.py       gunicorn's HTTP/1.1 parser, request, response and environ, trimmed
- certwatcher.py  the SSL context, rebuilt when the certificate files rotate
- app.py          the WSGI app: admission endpoints (with a fast path), probes, /metrics
- limits.py       body limits and the JSON error body, shared by worker.py and app.py
- runtime.py      a worker's live state: policy file and cluster view; `build_runtime`
- handlers/       the decisions, one module per endpoint family, and ENDPOINTS: the table
                  of webhook path -> handler
- review.py       the AdmissionReview wire format: TypedDicts, parsing, allow/deny/patch
- warning_texts.py  long messages as an admission response's warnings: short lines
- metrics.py      Prometheus metrics, shared across gunicorn's worker processes
"""
