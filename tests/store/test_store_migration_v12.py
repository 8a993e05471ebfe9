"""Schema 12 (issue 29 item 12): one conclusion id per fault. Walks an older diag recorded
under a runbook's own id for a fault another runbook names too (low-bandwidth's
link-physical-fault for an IB link fault) are renamed to the shared id, in the store when it
is opened and in an older export when it is imported; nothing else is touched."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from assistant.store import Store
from assistant.store.schema import CURRENT_VERSION
from tests.store.storehelpers import export_as_written, old_store, rows

pytestmark = pytest.mark.store

# (session, runbook, conclusion recorded by an older diag)
WALKS = (("ses000000001", "low-bandwidth", "link-physical-fault"),
         ("ses000000002", "crash", "host-oom-kill"),
         ("ses000000003", "hang", "nccl-wrong-interface"),
         ("ses000000004", "launch-failure", "nccl-init-config"),
         ("ses000000005", "hang", "ib-link-fault"))  # already the shared id


def build_v11(path: Path) -> None:
    con = old_store(path, 11)
    for n, (session, runbook, conclusion) in enumerate(WALKS, 1):
        incident = f"inc00000000{n}"
        con.execute("INSERT INTO incidents (id, title, status, opened, conclusion) VALUES "
                    "(?, 'walked', 'open', TIMESTAMP '2026-11-02 03:04', ?)",
                    [incident, conclusion])
        con.execute("INSERT INTO sessions (id, incident_id, runbook, operator, started, updated, "
                    "status, hosts_n, conclusion) VALUES (?, ?, ?, 'ana', TIMESTAMP "
                    "'2026-11-02 03:04', TIMESTAMP '2026-11-02 03:05', 'concluded', 1, ?)",
                    [session, incident, runbook, conclusion])
        for seq, (node, goto) in enumerate((("check-first", conclusion), (conclusion, None))):
            con.execute("INSERT INTO steps (session_id, seq, idx, node, kind, goto, started, "
                        "ended) VALUES (?, ?, ?, ?, 'probe', ?, TIMESTAMP '2026-11-02 03:05', "
                        "TIMESTAMP '2026-11-02 03:05')", [session, seq, seq, node, goto])
    con.execute("INSERT INTO drills VALUES ('drl000000001', 'bo', 'low-bandwidth-ib-rate-"
                "degraded', 'low-bandwidth', 'link-physical-fault', 'link-physical-fault', "
                "true, 4, 4, 0, 61.5, TIMESTAMP '2026-11-03 10:00')")
    con.close()


def conclusions(con: duckdb.DuckDBPyConnection | Store) -> dict[str, object]:
    sql = ("SELECT s.id, s.conclusion, i.conclusion, list(st.node ORDER BY st.seq), "
           "list(st.goto ORDER BY st.seq) FROM sessions s JOIN incidents i "
           "ON i.id = s.incident_id JOIN steps st ON st.session_id = s.id GROUP BY ALL")
    got = rows(con, sql) if isinstance(con, Store) else con.execute(sql).fetchall()
    return {r[0]: tuple(r[1:]) for r in got}


SHARED = {"ses000000001": "ib-link-fault", "ses000000002": "host-oom",
          "ses000000003": "nccl-wrong-nic", "ses000000004": "nccl-wrong-nic",
          "ses000000005": "ib-link-fault"}


def expected() -> dict[str, object]:
    return {s: (c, c, ["check-first", c], [c, None]) for s, c in SHARED.items()}


def test_an_older_store_gets_the_shared_ids(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v11(db)
    store = Store(db)
    assert store.version() == CURRENT_VERSION >= 12
    assert conclusions(store) == expected()
    assert rows(store, "SELECT conclusion, expected FROM drills") == [
        ("ib-link-fault", "ib-link-fault")]


def test_an_id_is_renamed_only_in_the_runbook_that_used_it(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    build_v11(db)
    with duckdb.connect(str(db)) as con:  # a hang walk whose node happens to bear crash's old id
        con.execute("UPDATE steps SET node = 'host-oom-kill' "
                    "WHERE session_id = 'ses000000005' AND seq = 0")
    store = Store(db)
    assert rows(store, "SELECT node FROM steps WHERE session_id = 'ses000000005' "
                       "ORDER BY seq") == [("host-oom-kill",), ("ib-link-fault",)]


def test_an_older_export_gets_the_shared_ids_when_imported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from assistant.cli import main

    db = tmp_path / "old.duckdb"
    build_v11(db)
    export = export_as_written(db, tmp_path / "shared" / "ana")
    mine = tmp_path / "mine.duckdb"
    assert main(["import", str(export), "--db", str(mine)]) == 0, capsys.readouterr().err
    assert conclusions(Store(mine)) == expected()
