"""``diag bundle`` on a recorded XID incident (a real DuckDB file): what a hardware ticket
needs is in it — the XID lines, ``nvidia-smi -q`` of that GPU — and nothing secret; the same
store gives the same bytes; the size bound holds and says what it left out."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store
from tests.store.storehelpers import ROOT, one

# Secrets a node's output or an operator's symptom could carry (made-up values of real
# shapes); the bundle's own scan looks for each, and for any token shape the redactor knows.
SECRETS = {
    "hf": "hf_" + "Qx7" * 12,
    "aws": "AKIA" + "Z7Q4" * 4,
    "github": "ghp_" + "a1B2" * 9,
    "password": "hunter2-correct-horse",
    "key": "MIIEowIBAAKCAQEAtopsecretkeymaterial",
}
TOKEN_SHAPES = re.compile(
    r"hf_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}"
    r"|BEGIN [A-Z ]*PRIVATE KEY-----\s*[A-Za-z0-9+/]{16}|password=(?!\[REDACTED\])\S+")


def xid_incident(tmp_path: Path) -> tuple[str, str]:
    """crash-xid48-dbe recorded into a fresh store, with secrets planted in gpu007's output
    and in the symptom; returns (store path, incident id)."""
    source = ROOT / "fixtures/scenarios/crash-xid48-dbe"
    scenario = tmp_path / "xid48"
    shutil.copytree(source, scenario)
    out = scenario / "outputs/gpu-gpu007-xid48.txt"
    text = out.read_text()
    planted = (f"[1208118.702799] launcher: HF_TOKEN={SECRETS['hf']} "
               f"AWS_ACCESS_KEY_ID={SECRETS['aws']} password={SECRETS['password']}\n"
               "-----BEGIN RSA PRIVATE KEY-----\n" + SECRETS["key"] + "\n"
               "-----END RSA PRIVATE KEY-----\n")
    out.write_text(text.replace("=== diag:rc kernel_log 0", planted + "=== diag:rc kernel_log 0"))
    spec = scenario / "scenario.yaml"
    spec.write_text(spec.read_text().replace(
        "symptom: >-\n", f"symptom: >-\n  token {SECRETS['github']} in the launcher log.\n"))
    db = str(tmp_path / "diag.duckdb")
    assert main(["run", "crash", "--scenario", str(scenario), "--auto", "--db", db]) == 1
    return db, one(Store(db), "SELECT id FROM incidents")


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers()}


def test_bundle_of_an_xid_incident(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, incident = xid_incident(tmp_path)
    capsys.readouterr()
    first, second = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    assert main(["bundle", incident[:6], "-o", str(first), "--db", db]) == 0
    assert main(["bundle", incident, "-o", str(second), "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{first}: incident {incident}, ")
    assert first.read_bytes() == second.read_bytes()  # reproducible, byte for byte
    assert first.stat().st_mode & 0o777 == 0o600

    files = members(first)
    manifest = json.loads(files["manifest.json"])
    assert manifest["format"] == "diag-bundle/1" and manifest["incident"] == incident
    assert manifest["omitted"] == [] and manifest["hosts"] == ["gpu007"]
    listed = {f["path"]: f for f in manifest["files"]}
    assert set(listed) == set(files) - {"manifest.json"}
    for name, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256(files[name]).hexdigest()
        assert entry["bytes"] == len(files[name])

    kernel = files["kernel/gpu007.txt"].decode()
    assert "NVRM: Xid (PCI:0000:4c:00): 48, pid=2290117, name=python3, An uncorrectable " \
           "double bit error (DBE)" in kernel
    assert "Xid (PCI:0000:4c:00): 63" in kernel
    smi = files["gpus/gpu007-4c00.txt"].decode()
    assert smi.startswith("==============NVSMI LOG==============")
    assert "GPU 00000000:4C:00.0" in smi and "GPU 00000000:19:00.0" not in smi
    assert re.search(r"Uncorrectable Error\s+: 1\n\s+Pending\s+: Yes", smi)
    raw = [n for n in files if n.startswith("raw/gpu007/gpu-")]
    assert len(raw) == 1 and "=== diag:section remap" in files[raw[0]].decode()
    assert {"report.md", "report.json", "walks.json", "versions.json"} <= set(files)
    walks = json.loads(files["walks.json"])
    assert walks[0]["runbook"] == "crash" and walks[0]["path"][-1]["kind"] == "conclusion"

    # The bundle's own secret scan: no planted value, no token shape, in any file.
    for name, data in files.items():
        text = data.decode()
        for what, secret in SECRETS.items():
            assert secret not in text, f"{what} secret in {name}"
        assert not TOKEN_SHAPES.search(text), f"a token in {name}: {TOKEN_SHAPES.search(text)}"
    assert "HF_TOKEN=[REDACTED]" in files[raw[0]].decode()  # it was there, and is hidden


def test_bundle_is_bounded_and_says_what_it_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, incident = xid_incident(tmp_path)
    target = tmp_path / "small.tar.gz"
    assert main(["bundle", incident, "-o", str(target), "--max-size", "0.012", "--db", db]) == 0
    assert "left out over the size bound" in capsys.readouterr().out
    files = members(target)
    manifest = json.loads(files["manifest.json"])
    assert manifest["bytes"] <= 0.012 * 1024 * 1024
    assert sum(len(d) for n, d in files.items() if n != "manifest.json") == manifest["bytes"]
    left = {f["path"] for f in manifest["omitted"]}
    assert left and all(p not in files for p in left)
    assert "report.md" in files  # the summaries come first


def test_bundle_refuses_what_it_cannot_do(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    db, _ = xid_incident(tmp_path)
    capsys.readouterr()
    assert main(["bundle", "nope", "-o", str(tmp_path / "x.tar.gz"), "--db", db]) == 2
    assert capsys.readouterr().err.startswith("diag: no incident 'nope'")
    assert main(["bundle", "latest", "-o", str(tmp_path / "no/such/dir/x.tar.gz"),
                 "--db", db]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.tar.gz"))
