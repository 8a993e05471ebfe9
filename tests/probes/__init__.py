"""diag's tests (a package: shared helpers are imported as tests.<dir>.<module>)."""
