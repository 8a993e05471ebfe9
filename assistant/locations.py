"""Where diag's shipped data lives, in a wheel and in a source checkout alike."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    # An installed wheel carries the data under assistant/_data (see pyproject's
    # force-include); an editable install or a checkout has it at the repository root.
    shipped = _PACKAGE / "_data" / name
    if shipped.is_dir():
        return shipped
    return _PACKAGE.parent / name


def runbooks_dir() -> Path:
    return _data_dir("runbooks")


def kb_dir() -> Path:
    return _data_dir("kb")


def fixtures_dir() -> Path:
    return _data_dir("fixtures")
