"""Actions taken outside diag (issue 29 item 10): recorded on the incident (schema 11), in the
report's actions, redacted, exported, pooled, imported once, moved by a merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store
from tests.store.storehelpers import XID, one, record_walk

pytestmark = pytest.mark.store


def test_outside_actions_reach_the_report_and_the_pool(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "ana")
    store = Store(tmp_path / "ana.duckdb")
    session, _ = record_walk(store, XID, {})
    incident = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [session])
    db = ["--db", str(store.path)]
    assert main(["incident", "action", incident, "--kind", "power-cycle", *db,
                 "power cycled gpu002 from the BMC: curl -u admin:hunter2-correct-horse "
                 "https://bmc/reset"]) == 0
    assert main(["incident", "action", incident, "--kind", "rma", *db,
                 "RMA 7731 opened for GPU 1652823054171"]) == 0
    assert main(["incident", "action", incident, "--kind", "juggle", *db, "x"]) == 2
    capsys.readouterr()
    assert main(["report", incident, *db]) == 0
    actions = capsys.readouterr().out.split("## Actions", 1)[1].split("##", 1)[0]
    assert "power-cycle (outside diag, recorded by ana): power cycled gpu002" in actions
    assert "rma (outside diag, recorded by ana): RMA 7731" in actions
    assert "hunter2" not in actions and "[REDACTED]" in actions

    shared = tmp_path / "shared"
    for n in (1, 2):  # exported twice: counted once in the pool
        assert main(["export", "--parquet", str(shared / f"ana-{n}"), *db]) == 0
    capsys.readouterr()
    assert main(["report", incident, "--from", str(shared), "--format", "json"]) == 0
    pooled = json.loads(capsys.readouterr().out)["actions_outside"]
    assert [a["kind"] for a in pooled] == ["power-cycle", "rma"]
    other = Store(tmp_path / "ben.duckdb")
    assert main(["import", str(shared), "--db", str(other.path)]) == 0
    assert main(["import", str(shared), "--db", str(other.path)]) == 0
    assert one(other, "SELECT count(*) FROM incident_actions") == 2

    second, _ = record_walk(store, XID, {}, symptom="again")
    absorbed = one(store, "SELECT incident_id FROM sessions WHERE id = ?", [second])
    assert absorbed != incident  # (open_session: a new incident)
    assert main(["incident", "action", absorbed, "reseated", "--kind", "reseat", *db]) == 0
    assert main(["incident", "merge", incident, absorbed, *db]) == 0
    assert one(store, "SELECT count(*) FROM incident_actions WHERE incident_id = ?",
               [incident]) == 3
