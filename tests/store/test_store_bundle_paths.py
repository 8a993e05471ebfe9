"""Issue 27 item 4: a bundle must never write outside its directory when extracted.

Host names, probe names and ids come from the store, and a store may hold what another
operator's export brought (`diag import`): ``../../../../escaped`` became a tar member path and
``tar`` / ``extractall`` wrote four levels up. Every name in a bundle is a sanitized path
component, unique after sanitizing, and the tar writer refuses any member that is absolute,
climbs (``..``) or is not a regular file."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.store import Store
from assistant.store.raw import add_blobs, blob
from tests.store.storehelpers import HOSTS, RawProvider, record_walk

pytestmark = pytest.mark.store

# What an import can bring as a host name: each must become its own file, inside the bundle.
HOSTILE = ["../../../../escaped", "gpu/002", "gpu\\002", "gpu_002", "-rf \x1b[2J\n", "..",
           ".hidden", "/etc/cron.d/evil", "h" * 300]
INCIDENT = "../../../../incident"
SESSION = "/tmp/../../session"
XID_ALL = {"gpu": {"findings": [{"code": "xid-drain", "hosts": HOSTS,
                                 "evidence": {"xids": [79], "bus": "00000000:4C:00.0"}}],
                   "facts": {h: {"temperature_max_c": 60} for h in HOSTS}}}


def gpu_output(mark: str) -> str:
    """The gpu probe's output with a kernel XID line, the query row and the nvidia-smi -q
    block of the GPU at 4c:00; *mark* tells the hosts' files apart."""
    return ("=== diag:section query\n0, NVIDIA H100, 00000000:4C:00.0\n"
            "=== diag:section remap\n==============NVSMI LOG==============\n"
            f"GPU 00000000:4C:00.0\n    Serial Number : {mark}\n"
            "=== diag:section kernel_log\n"
            f"[9.0] NVRM: Xid (PCI:0000:4c:00): 79, pid=1, GPU has fallen off the bus {mark}\n")


def hostile_store(tmp_path: Path) -> Path:
    """An XID incident whose hosts, session and incident carry the names above, as an
    imported export can (written straight into the store, as an older diag imported them)."""
    store = Store(tmp_path / "diag.duckdb")
    raw = {("gpu", h): gpu_output(h) for h in HOSTS}
    record_walk(store, XID_ALL, {}, provider=RawProvider(XID_ALL, raw))

    def plant(con: object) -> None:
        for i, name in enumerate(HOSTILE):
            digest, row = blob(gpu_output(f"mark-{i}"))
            add_blobs(con, [row])  # type: ignore[arg-type]
            for table in ("hosts", "probe_runs", "findings"):
                extra = ", ? AS raw_hash" if table == "probe_runs" else ""
                con.execute(  # type: ignore[attr-defined]
                    f"INSERT INTO {table} SELECT * REPLACE (? AS host{extra}) FROM {table} "
                    "WHERE host = 'gpu001'", [name, digest] if extra else [name])
        for table in ("hosts", "steps", "probe_runs", "findings", "actions"):
            con.execute(f"UPDATE {table} SET session_id = ?", [SESSION])  # type: ignore
        con.execute("UPDATE sessions SET id = ?, incident_id = ?",  # type: ignore
                    [SESSION, INCIDENT])
        con.execute("UPDATE incidents SET id = ?", [INCIDENT])  # type: ignore

    store.write(plant)
    return store.path


def test_hostile_names_stay_inside_the_bundle(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = hostile_store(tmp_path)
    target = tmp_path / "ticket.tar.gz"
    assert main(["bundle", "latest", "-o", str(target), "--db", str(db)]) == 0
    capsys.readouterr()

    with tarfile.open(target) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert len(names) == len(set(names))  # none overwrites another
        for m in members:
            assert m.isreg(), f"{m.name!r} is not a regular file"
            assert not m.name.startswith("/") and "\\" not in m.name, m.name
            for part in m.name.split("/"):
                assert part not in ("", ".", "..") and part[0] not in ".-", m.name
                assert part.isprintable() and len(part) <= 100, m.name
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                 for m in members}
        # Extracted as a user would: everything lands inside the destination.
        dest = tmp_path / "a" / "b" / "c" / "d" / "out"
        dest.mkdir(parents=True)
        tar.extractall(dest, filter="data")
    outside = [p for p in tmp_path.rglob("*") if dest not in p.parents and p != dest
               and p.is_file() and p not in (target, db) and not p.name.startswith(db.name)]
    assert outside == []

    # Every hostile host kept its own kernel, GPU and raw files (no two names merged).
    manifest = json.loads(files["manifest.json"])
    for kind in ("kernel/", "gpus/", "raw/"):
        marks = {f"mark-{i}" for i in range(len(HOSTILE))
                 if any(f"mark-{i}\n" in data.decode() for name, data in files.items()
                        if name.startswith(kind))}
        assert len(marks) == len(HOSTILE), kind
    for entry in manifest["files"]:
        assert entry["path"] in files
    assert manifest["incident"] == INCIDENT  # the manifest still says what it was


def test_the_tar_writer_refuses_escaping_members() -> None:
    from datetime import datetime

    from assistant.store.bundle import _tar_gz

    stamp = datetime(2026, 1, 1)
    for name in ("../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", ""):
        with pytest.raises(ValueError):
            _tar_gz("diag-bundle-1", {name: b"x"}, stamp)
    with pytest.raises(ValueError):
        _tar_gz("..", {"a.txt": b"x"}, stamp)
    data = _tar_gz("diag-bundle-1", {"kernel/gpu001.txt": b"x"}, stamp)
    import gzip
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        assert [m.name for m in tar.getmembers()] == ["diag-bundle-1/kernel/gpu001.txt"]


def test_safe_names_are_components_and_unique() -> None:
    from assistant.store.bundle import Names

    names = Names()
    seen = [names.component(h) for h in ["gpu001", *HOSTILE, "gpu001"]]
    assert seen[0] == seen[-1] == "gpu001"  # a plain name is kept, and kept the same
    assert len(set(seen[:-1])) == len(seen) - 1
    for name in seen:
        assert name and "/" not in name and "\\" not in name and name[0] not in ".-"
        assert name.isprintable() and len(name) <= 100 and ".." not in name.split("/")
