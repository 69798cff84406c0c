"""poolguard: deletion-cost admission webhooks and tools for GPU node pools."""

__version__ = "0.1.0"
