"""The admission webhook: review parsing, handlers, the Flask app, gunicorn and TLS."""
