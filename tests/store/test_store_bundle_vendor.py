"""The vendor bundle names what a vendor asks for first (issue 29 item 4): for an XID 79
incident — the GPU off the bus, no nvidia-smi of it — the driver version and the board serial
from every source the incident holds (the kernel log's NVRM load line, an nvidia-smi -q
header, the sweep's facts), the command line behind each raw file, an as_of with its time
zone, and a README."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store
from tests.store.storehelpers import ROOT, one
from tests.store.test_store_bundle import members

pytestmark = pytest.mark.store

SERIAL = "1652823054171"


def test_an_xid79_bundle_names_driver_serial_and_commands(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "xid79"
    shutil.copytree(ROOT / "fixtures/scenarios/hang-xid79-fallen-off-bus", scenario)
    out = scenario / "outputs/gpu-gpu003-xid79.txt"
    # an earlier nvidia-smi -q of the node printed the board before it fell off
    out.write_text(out.read_text().replace(
        "=== diag:section remap\n",
        "=== diag:section remap\nDriver Version                            : 550.90.07\n"
        f"GPU 00000000:9B:00.0\n    Serial Number                         : {SERIAL}\n"))
    db = str(tmp_path / "diag.duckdb")
    main(["run", "hang", "--scenario", str(scenario), "--auto", "--db", db])
    incident = one(Store(db), "SELECT id FROM incidents")
    bundle = tmp_path / "b.tar.gz"
    capsys.readouterr()
    assert main(["bundle", incident, "--db", db, "-o", str(bundle)]) == 0
    files = members(bundle)

    versions = json.loads(files["versions.json"])
    host = versions["gpu003"]
    drivers = {d["value"]: d["sources"] for d in host["driver_version"]}
    assert set(drivers) == {"550.90.07"}
    assert any("NVRM line (kernel log" in s for s in drivers["550.90.07"])
    assert any("nvidia-smi header" in s for s in drivers["550.90.07"])
    assert [d["value"] for d in host["gpu_serials"]] == [SERIAL]
    assert "GPU-ecc69352-fde7-120d-e77c-7b6f5155995f" in {d["value"] for d in host["gpu_uuids"]}
    assert "gpus/" not in files["versions.json"].decode()  # no pointer to files not there

    commands = json.loads(files["commands.json"])
    raw = [name for name in files if name.startswith("raw/")]
    assert raw and set(raw) <= set(commands)
    gpu = next(c for n, c in commands.items() if c["probe"] == "gpu")
    assert {"section": "remap", "command": "timeout 15 nvidia-smi -q -d ROW_REMAPPER"} \
        in gpu["sections"]

    manifest = json.loads(files["manifest.json"])
    as_of = datetime.fromisoformat(manifest["as_of"])
    assert as_of.utcoffset() is not None and as_of.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    readme = files["README.txt"].decode()
    assert f"gpu003: driver 550.90.07; GPU serials {SERIAL}" in readme
    assert "commands.json" in readme and manifest["as_of"] in readme
    assert "README.txt" in {f["path"] for f in manifest["files"]}
