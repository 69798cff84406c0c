"""The reconciler: sets deletion costs on scheduled pods, leader-elected and rate-limited."""
