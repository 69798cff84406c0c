"""The command line: one module per command (plan, serve, reconcile) and shared argument types."""
