"""diag: a troubleshooting assistant and runbook engine for GPU training clusters."""

__version__ = "0.1.0"
