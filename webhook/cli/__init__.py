"""The command line: one module per command (plan, serve, reconcile, policy, rebalance) and
shared argument types."""
