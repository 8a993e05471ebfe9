"""A walk that joins a teammate's open incident says whose (issue 29 item 11): the reason it
joined names the teammates, and the reason is what the JSON, the first lines of `diag run` and
the TUI's incident bar show."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from assistant.store import Store
from tests.store.storehelpers import ATTRS, HOSTS

pytestmark = pytest.mark.store


def test_joining_a_teammates_incident_names_the_teammate(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    window = timedelta(hours=4)
    first = store.start_session("mini", HOSTS, ATTRS, operator="ana", join_window=window)
    assert first.joined is None
    again = store.start_session("mini", HOSTS, ATTRS, operator="ana", join_window=window)
    assert again.incident == first.incident and "teammate" not in (again.joined or "")
    ben = store.start_session("mini", HOSTS, ATTRS, operator="ben", join_window=window)
    assert ben.incident == first.incident
    assert ben.joined is not None and ben.joined.endswith(
        "; a teammate's incident, walked by ana")
