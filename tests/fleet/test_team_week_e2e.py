"""Issue 29's week, played over real sshd: two engineers walk a GPU that keeps falling off
the bus (three incidents), each in a store of their own, exporting to a shared directory; a
third reads the pooled history in a third store. One export is from an older diag, one from a
newer. The recurring host is a lead; no secret typed anywhere is in any export, report, query
result or bundle; the newer export gets its line; the bundle names the driver, the serial and
the commands; a heavy query writes no byte outside the store.

The fleet is the session's loopback sshd replay fleet (tests/fleet/replayfleet.py) serving the
hang-xid79-fallen-off-bus scenario, with the board's serial planted in an earlier nvidia-smi
-q; each walk covers two of its hosts (gpu003 and a healthy peer) to stay quick."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import duckdb
import pytest

from assistant.cli import main
from assistant.fleet.scenario import load_scenario, scenarios_dir
from assistant.store.schema import CURRENT_VERSION
from tests.fleet import replayfleet, sshfleet
from tests.store.test_store_query_bounds import HEAVY
from tests.store.test_store_versions import newer_export

pytestmark = [pytest.mark.ssh, pytest.mark.store]

SERIAL = "1652823054171"
HF = "hf_" + "Qx7" * 12
PASSWORD = "hunter2-correct-horse"
GH = "ghp_" + "a1B2" * 9
SECRETS = (HF, PASSWORD, GH)


def _diag(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


def _parquet_text(export: Path) -> str:
    con = duckdb.connect()
    try:
        return "\n".join(str(con.execute(f"SELECT * FROM read_parquet('{f}')").fetchall())
                         for f in sorted(export.glob("*.parquet")))
    finally:
        con.close()


def _older(export: Path) -> None:
    """*export* as a diag one schema step back wrote it: no manifest, schema_version's last
    step gone."""
    (export / "export.json").unlink()
    steps = export / "schema_version.parquet"
    con = duckdb.connect()
    try:
        con.execute(f"COPY (SELECT * FROM read_parquet('{steps}') WHERE version < "
                    f"{CURRENT_VERSION}) TO '{steps}.tmp' (FORMAT parquet)")
    finally:
        con.close()
    Path(f"{steps}.tmp").replace(steps)


def test_the_teams_week(replay_fleet: tuple[sshfleet.SSHFleet, Path], tmp_path: Path,
                        capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    ssh_fleet, replay = replay_fleet
    source = tmp_path / "xid79"
    shutil.copytree(scenarios_dir() / "hang-xid79-fallen-off-bus", source)
    out = source / "outputs/gpu-gpu003-xid79.txt"
    out.write_text(out.read_text().replace(
        "=== diag:section remap\n",
        "=== diag:section remap\nDriver Version                            : 550.90.07\n"
        f"GPU 00000000:9B:00.0\n    Serial Number                         : {SERIAL}\n"))
    inventory = replayfleet.stage(load_scenario(str(source)), ssh_fleet, replay, tmp_path)
    stores = {who: tmp_path / f"{who}.duckdb" for who in ("ana", "ben", "carol")}
    shared = tmp_path / "shared"
    monkeypatch.chdir(tmp_path)

    def walk(who: str) -> str:
        monkeypatch.setenv("USER", who)
        code, text, _ = _diag(capsys, "run", "hang", "--inventory", str(inventory),
                              "--hosts", "gpu002,gpu003", "--auto", "--json", "--timeout", "8",
                              "--deadline", "60", "--connect-timeout", "20",
                              "--db", str(stores[who]))
        doc = json.loads(text)
        assert code == 1 and doc["conclusion"]["id"] == "gpu-hardware-fault", doc["path"]
        return str(doc["incident"]["id"])

    # Monday ana, Wednesday ben, Friday ana: gpu003's GPU off the bus each time; each closes
    # the incident with a cause someone pasted a credential into, and tags it.
    for n, who in enumerate(("ana", "ben", "ana")):
        incident = walk(who)
        assert _diag(capsys, "incident", "close", incident, "--db", str(stores[who]),
                     "--cause", f"GPU4 off the bus again, reseated; BMC via curl -u "
                     f"admin:{PASSWORD} https://bmc; HF_TOKEN={HF}")[0] == 0
        assert _diag(capsys, "incident", "tag", incident, f"token={GH}", f"rma-{n}",
                     "--db", str(stores[who]))[0] == 0
    for who in ("ana", "ben"):
        assert _diag(capsys, "export", "--parquet", str(shared / who), "--db",
                     str(stores[who]))[0] == 0
    _older(shared / "ana")                      # ana runs last month's diag
    newer_export(shared / "ben", shared / "dee")  # dee, on a newer diag, exported ben's copy
    shutil.rmtree(shared / "ben")

    # carol reads the team's history: the recurring host is a lead, the newer export is named
    code, text, err = _diag(capsys, "correlate", "--from", str(shared))
    assert code == 0
    assert "lead: repeat offender: " in text and " on host gpu003: 3 incidents" in text, text
    newer = [line for line in err.splitlines() if "newer diag" in line]
    assert len(newer) == 1 and str(shared / "dee") in newer[0]
    assert "sessions.fabric" in newer[0]
    code, text, _ = _diag(capsys, "correlate", "--from", str(shared), "--json")
    leads = json.loads(text)["repeat_offenders"]
    assert {(r["kind"], r["key"], r["incidents"]) for r in leads} >= {("host", "gpu003", 3)}

    # carol imports both into her store, then reports, queries and bundles from it and the pool
    assert _diag(capsys, "import", str(shared / "ana"), "--db", str(stores["carol"]))[0] == 0
    said: list[str] = []
    for source_args in (["--from", str(shared)], ["--db", str(stores["carol"])]):
        for sql in ("SELECT * FROM incidents", "SELECT * FROM sessions",
                    "SELECT * FROM steps", "SELECT * FROM actions"):
            code, text, err = _diag(capsys, "query", *source_args, "--format", "json", sql)
            assert code == 0, err
            said.append(text)
        code, text, _ = _diag(capsys, "report", "latest", *source_args)
        assert code == 0 and "gpu003" in text
        said.append(text)
    latest = json.loads(said[0])[0]["id"]
    bundle = tmp_path / "ticket.tar.gz"
    assert _diag(capsys, "bundle", latest, "--from", str(shared), "-o", str(bundle))[0] == 0
    with tarfile.open(bundle) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                 for m in tar.getmembers()}
    said += files.values()
    said += [_parquet_text(e) for e in shared.iterdir()]
    leaked = [s for s in SECRETS for text in said if s in text]
    assert not leaked
    assert any("[REDACTED]" in text for text in said)

    # the bundle names what a vendor asks for first
    versions = json.loads(files["versions.json"])["gpu003"]
    assert [d["value"] for d in versions["driver_version"]] == ["550.90.07"]
    assert [d["value"] for d in versions["gpu_serials"]] == [SERIAL]
    assert any(c["probe"] == "gpu" and c["sections"]
               for c in json.loads(files["commands.json"]).values())
    assert f"driver 550.90.07; GPU serials {SERIAL}" in files["README.txt"]

    # a heavy query writes no byte outside the store, on the store or the pool
    before = _tree(tmp_path)
    for source_args in (["--from", str(shared)], ["--db", str(stores["carol"])]):
        code, _, err = _diag(capsys, "query", *source_args, "--memory", "64", HEAVY)
        assert code == 2 and "--memory 64 MiB" in err
    assert _tree(tmp_path) == before
