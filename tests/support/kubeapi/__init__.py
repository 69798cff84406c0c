"""A fake Kubernetes API server for tests (the server: `kubeapi.server.FakeKubeAPI`).

- server.py       the server and its test hooks: objects, CRDs, faults, the request log
- handler.py      HTTP: paths parsed into resources, JSON answers, watch streams
- store.py        objects, the resourceVersion counter, the event history, open watches
- watch.py        a watch and the events it is handed
- eviction.py     the Eviction API with PodDisruptionBudgets
- patch.py        merge and JSON patches
- selectors.py    label and field selectors
- resources.py    the resources served, their paths and keys
- errors.py       an error answered as a Status object
- faults.py       injected errors and delays
- request_log.py  a request as the server saw it
- helpers.py      objects out of List documents, polling with a timeout
"""
