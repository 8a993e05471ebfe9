"""diag: a troubleshooting assistant and runbook engine for GPU training clusters."""

from __future__ import annotations


def _package_version() -> str:
    """The installed package's version (pyproject.toml's ``version``, as the build wrote it
    into the package metadata: the one place it is set; CONTRIBUTING says when to bump it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("diag")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    # ``assistant.__version__`` is read from the metadata when asked for, not at import:
    # importlib.metadata costs a fast start (``diag match``) what it never needs.
    if name == "__version__":
        return _package_version()
    raise AttributeError(f"module 'assistant' has no attribute {name!r}")
