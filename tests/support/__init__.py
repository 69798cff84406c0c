"""Test helpers: object factories, reviews, a fake Kubernetes API, a served webhook."""
