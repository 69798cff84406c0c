"""poolguard's pure core: no I/O, no Flask, no Kubernetes client.

Everything here works on plain dicts shaped like Kubernetes objects and returns
plain data, so the admission server, the reconciler and `plan` share one truth.
"""
