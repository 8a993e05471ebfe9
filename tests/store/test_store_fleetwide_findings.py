"""A finding about every host of a big walk is stored in linear space (issue 28 item 2).

One row per (finding, host) used to carry the whole evidence, so a finding on N hosts with an
entry per host stored N x N entries: 16 such findings over 1,000 hosts held 7.7 GB while
DuckDB took them in. Now the first host's row keeps the evidence whole (the report shows it)
and the others keep their own part; small evidence stays whole everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.store import Store
from assistant.store.base import insert_rows
from assistant.store.evidence_rows import WHOLE_UP_TO, host_rows, host_view
from assistant.store.reports import incident_report
from tests.store.storehelpers import HOSTS, XID, one, record_walk, rows

pytestmark = pytest.mark.store

REASONS = {h: f"parse-error: {h} printed something else " + "x" * WHOLE_UP_TO for h in HOSTS}
FLEET_WIDE = {"gpu": {**XID["gpu"], "findings": [
    {"code": "probe-parse-error", "severity": "warning", "hosts": HOSTS,
     "evidence": {"reasons": REASONS, "hosts": HOSTS, "probe": "gpu"}},
    {"code": "xid-drain", "hosts": ["gpu002"], "evidence": {"xids": [79], "count": 2}},
]}}


def test_each_host_row_keeps_its_own_part_and_the_first_keeps_it_whole(tmp_path: Path) -> None:
    store = Store(tmp_path / "diag.duckdb")
    session, _ = record_walk(store, FLEET_WIDE, {})
    stored = {host: json.loads(evidence) for host, evidence in rows(
        store, "SELECT host, evidence FROM findings WHERE session_id = ? "
               "AND code = 'probe-parse-error'", [session])}
    assert set(stored) == set(HOSTS)
    assert stored[HOSTS[0]]["reasons"] == REASONS and stored[HOSTS[0]]["hosts"] == HOSTS
    for host in HOSTS[1:]:
        assert stored[host] == {"reasons": {host: REASONS[host]}, "hosts": [host],
                                "probe": "gpu"}
    small = rows(store, "SELECT evidence FROM findings WHERE session_id = ? "
                        "AND code = 'xid-drain'", [session])
    assert [json.loads(e) for (e,) in small] == [{"xids": [79], "count": 2}]

    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [session])
    report = store.read(lambda con: incident_report(con, incident))
    parse = [f for f in report["evidence"] if f["code"] == "probe-parse-error"]
    assert len(parse) == 1 and parse[0]["evidence"]["reasons"] == REASONS
    assert parse[0]["hosts"] == sorted(HOSTS)


def test_the_rows_grow_linearly_with_the_hosts() -> None:
    hosts = [f"node{i:04d}" for i in range(1, 401)]
    evidence = {"reasons": {h: f"{h}: no diag sections in the output" for h in hosts}}
    text = json.dumps(evidence)
    sizes = [len(part or "") for part in host_rows(evidence, text, hosts)]
    assert sizes[0] == len(text)
    assert max(sizes[1:]) < 100  # one host's entry, not all 400
    assert sum(sizes) < 3 * len(text)  # was 400 times it: every row held it all


def test_small_evidence_and_lone_hosts_are_kept_whole() -> None:
    evidence = {"odd": {"gpu003": "535.154.05"}, "hosts": ["gpu001", "gpu003"]}
    text = json.dumps(evidence)
    assert list(host_rows(evidence, text, ["gpu001", "gpu003"])) == [text, text]
    assert list(host_rows({"x": "y" * 5000}, "big", ["gpu001"])) == ["big"]


def test_a_hosts_view_leaves_out_only_other_hosts_entries() -> None:
    hosts = frozenset({"a", "b", "c"})
    value = {"by_host": {"a": {"v": 1}, "b": {"v": 2}}, "groups": {"550": ["a", "b"],
                                                                  "535": ["c"]},
             "peers": ["a", "c"], "words": ["a", "x"], "n": 3}
    assert host_view(value, "b", hosts) == {"by_host": {"b": {"v": 2}},
                                            "groups": {"550": ["b"], "535": ["c"]},
                                            "peers": [], "words": ["a", "x"], "n": 3}


def test_inserts_are_cut_into_statements_without_losing_or_reordering_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import assistant.store.base as base

    monkeypatch.setattr(base, "CHUNK_CHARS", 100)
    store = Store(tmp_path / "diag.duckdb")
    data = [[i, "x" * (i % 7 * 20), json.dumps({"i": i})] for i in range(200)]
    statements: list[int] = []

    def write(con: base.Connection) -> None:
        con.execute("CREATE TEMP TABLE t (i INTEGER, s VARCHAR, j JSON)")
        real = con.execute

        class Counting:
            def execute(self, sql: str, params: object = None) -> object:
                statements.append(1)
                return real(sql, params)

        insert_rows(Counting(), "t", [("i", "INTEGER"), ("s", "VARCHAR"), ("j", "JSON")],
                    data)  # type: ignore[arg-type]
        got = con.execute("SELECT i, s, j FROM t ORDER BY rowid").fetchall()
        assert [list(row) for row in got] == data

    store.write(write)
    assert len(statements) > 20
