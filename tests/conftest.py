"""Test-wide isolation: no test writes to the operator's real incident store."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_DB", str(tmp_path / "diag.duckdb"))
