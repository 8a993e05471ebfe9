"""One real Prometheus for the whole session, over the planted history of tests.monitoring.history
(about 2 s to build and start)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.monitoring import history, promserver
from tests.tui.conftest import pytest_pyfunc_call  # noqa: F401  (the TUI walks' Pilot tests)


@pytest.fixture(scope="session")
def prom() -> Iterator[promserver.PromServer]:
    reason = promserver.unavailable_reason()
    if reason:
        promserver.skip_or_fail(reason)
    server = promserver.PromServer(history.openmetrics())
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        server.stop()
        promserver.skip_or_fail(f"Prometheus did not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def prom_config(prom: promserver.PromServer, tmp_path: Path):  # type: ignore[no-untyped-def]
    from assistant.monitoring.config import PromConfig

    secret = tmp_path / "password"
    secret.write_text(promserver.PASSWORD + "\n")
    return PromConfig(url=prom.url, username=promserver.USER, password_file=str(secret),
                      timeout=10.0)
